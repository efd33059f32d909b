// Copies non-TypeScript assets (the .proto files) next to the compiled output so
// `dist/src/...` code can find them at `dist/proto/` exactly as `src/` finds `proto/`.
import { cpSync, existsSync, mkdirSync } from 'node:fs';

mkdirSync('dist', { recursive: true });
if (existsSync('proto')) cpSync('proto', 'dist/proto', { recursive: true });
