/**
 * One instance per AppContext: plugins and per-app services are built once for an app and shared
 * by every module that uses them, without module-level singletons (tests build many apps).
 */
export function perContext<Key extends object, Value>(build: (key: Key) => Value): (key: Key) => Value {
  const instances = new WeakMap<Key, Value>()
  return (key) => {
    let instance = instances.get(key)
    if (instance === undefined) {
      instance = build(key)
      instances.set(key, instance)
    }
    return instance
  }
}
