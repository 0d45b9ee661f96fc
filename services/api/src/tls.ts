import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { ConfigError, type Config } from '@niclab/shared/runtime/config';

export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

function read(variable: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new ConfigError(variable, `cannot read ${path}: ${(error as Error).message}`);
  }
}

/**
 * The certificate and key the API serves HTTPS with, read and checked at start (a key that
 * does not match its certificate stops the start, naming the variable), or null for plain HTTP.
 */
export function apiTls(config: Pick<Config, 'tlsCertFile' | 'tlsKeyFile'>): TlsFiles | null {
  if (!config.tlsCertFile || !config.tlsKeyFile) return null;
  const cert = read('NICLAB_TLS_CERT_FILE', config.tlsCertFile);
  const key = read('NICLAB_TLS_KEY_FILE', config.tlsKeyFile);
  try {
    createSecureContext({ cert, key });
  } catch (error) {
    throw new ConfigError('NICLAB_TLS_KEY_FILE', `${config.tlsKeyFile} and ${config.tlsCertFile} are not a usable certificate and key: ${(error as Error).message}`);
  }
  return { cert, key };
}
