/**
 * `certbroker cni-plugin`: the istio-cni plugin run through the CLI (CNI_* variables and the
 * config on stdin, result or error object on stdout), for trying it by hand. Container runtimes
 * run the standalone executable (build/bin/istio-cni), which starts without commander.
 */
import { Command } from 'commander';

export function command(): Command {
  return new Command('cni-plugin')
    .description('run the istio-cni CNI plugin once (CNI_COMMAND etc. in the environment, config on stdin)')
    .action(async () => {
      const { readFileSync } = await import('node:fs');
      const { runPlugin } = await import('../cni/plugin/plugin.js');
      let stdin = '';
      if (process.env.CNI_COMMAND !== 'VERSION') {
        try {
          stdin = readFileSync(0, 'utf8');
        } catch {
          stdin = '';
        }
      }
      const outcome = await runPlugin({ env: process.env, stdin });
      process.stdout.write(outcome.stdout);
      process.exitCode = outcome.exitCode;
    });
}
