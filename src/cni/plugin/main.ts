/**
 * istio-cni entry point (the binary the container runtime executes). Kept small and free of
 * heavy imports: it reads stdin, runs one command, prints the result and exits.
 */
import { readFileSync } from 'node:fs';
import { runPlugin } from './plugin.js';

function readStdin(): string {
  try {
    return readFileSync(0, 'utf8');
  } catch {
    return ''; // closed or absent stdin: the command decides whether that is an error
  }
}

async function main(): Promise<void> {
  const outcome = await runPlugin({ env: process.env, stdin: process.env.CNI_COMMAND === 'VERSION' ? '' : readStdin() });
  process.stdout.write(outcome.stdout, () => process.exit(outcome.exitCode));
}

main().catch(() => {
  // runPlugin never rejects; this is the last line of defence, still in the spec's shape.
  process.stdout.write(JSON.stringify({ cniVersion: '1.1.0', code: 999, msg: 'internal error in istio-cni plugin', details: '' }) + '\n', () =>
    process.exit(1),
  );
});
