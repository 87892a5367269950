import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * scrypt with OWASP's recommended cost (N=2^14, r=8, p=5: 16 MiB, one of the
 * equivalent settings of the Password Storage Cheat Sheet), stored as
 * `$scrypt$ln=14,r=8,p=5$<salt>$<hash>` (base64) so the cost can be raised later.
 */
const DEFAULT_COST = { ln: 14, r: 8, p: 5 };
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
const HASH_FORMAT = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

function derive(password: string, salt: Buffer, cost: { ln: number; r: number; p: number }): Promise<Buffer> {
  const N = 2 ** cost.ln;
  const options: ScryptOptions = { N, r: cost.r, p: cost.p, maxmem: 256 * N * cost.r + 1024 * 1024 };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** A new salted slow hash of the password. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, DEFAULT_COST);
  const { ln, r, p } = DEFAULT_COST;
  return `$scrypt$ln=${ln},r=${r},p=${p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Whether the password matches the stored hash; compares in constant time. A malformed hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const match = HASH_FORMAT.exec(stored);
  if (match === null) return false;
  const [, ln, r, p, salt, hash] = match;
  const expected = Buffer.from(hash!, 'base64');
  const cost = { ln: Number(ln), r: Number(r), p: Number(p) };
  if (cost.ln < 1 || cost.ln > 20 || cost.r < 1 || cost.p < 1 || expected.length !== KEY_LENGTH) return false;
  const actual = await derive(password, Buffer.from(salt!, 'base64'), cost);
  return timingSafeEqual(actual, expected);
}

/** How long one hash at the default cost takes on this machine, measured once by hashing a random password. */
export async function measureHashMs(): Promise<number> {
  const started = performance.now();
  await hashPassword(randomBytes(16).toString('hex'));
  return performance.now() - started;
}
