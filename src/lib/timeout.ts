/**
 * `promise`, or after `milliseconds` a rejection with `onTimeout()`'s reason (a plain "timeout"
 * error by default). `onTimeout` runs once, when the time is up, for what giving up entails. The
 * promise given up on is still observed, so its later rejection is nobody's unhandled one.
 */
export function withTimeout<T>(
  promise: Promise<T>,
  milliseconds: number,
  onTimeout: () => unknown = () => new Error('timeout'),
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), milliseconds)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
