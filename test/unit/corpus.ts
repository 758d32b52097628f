/** Where the public capture corpus lives in this repository (test/pcaps, from dist/test/unit). */
import { join } from 'node:path';

export const PCAPS = join(__dirname, '..', '..', '..', 'test', 'pcaps');
