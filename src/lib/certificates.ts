import { readFileSync } from 'node:fs'

/**
 * The certificate authorities of a PEM file an operator names (DATABASE_URL's `sslrootcert`,
 * REDIS_TLS_CA_FILE), read once at start. Throws with a message that names the file and what is
 * wrong with it (`"/etc/ca.pem" cannot be read (ENOENT)`, `… holds no PEM certificate`), for the
 * caller to prefix with the setting's name.
 */
export function readCertificateAuthorities(
  path: string,
  readFile: (path: string) => string = (file) => readFileSync(file, 'utf8'),
): string {
  let text: string
  try {
    text = readFile(path)
  } catch (error) {
    throw new Error(`"${path}" cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) throw new Error(`"${path}" holds no PEM certificate`)
  return text
}
