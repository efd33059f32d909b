#!/usr/bin/env node
/**
 * `certbroker` — one CLI, one subcommand per component. Each subcommand lives in its own
 * module under src/cli/ that exports `command()`; the module itself stays light (option
 * definitions only) and imports the component when the action runs, so `--help` and short
 * commands start fast.
 */
import { Command } from 'commander';

/** Subcommand modules, in the order `--help` lists them. Each exports `command(): Command`. */
const SUBCOMMANDS: readonly string[] = [
  './start.js',
  './devcluster.js',
  './install-cni.js',
  './ca.js',
  './k8s-signer.js',
  './broker.js',
  './fetch.js',
  './iptables.js',
  './cni-plugin.js',
  './certs.js',
];

export async function buildProgram(): Promise<Command> {
  const program = new Command('certbroker')
    .description('SPIFFE X.509 identities for every Kubernetes workload, brokered per node (Istio ambient style)')
    .showHelpAfterError()
    .configureHelp({ sortSubcommands: false });
  for (const path of SUBCOMMANDS) {
    const mod = (await import(path)) as { command(): Command };
    program.addCommand(mod.command());
  }
  return program;
}

async function main(): Promise<void> {
  const program = await buildProgram();
  await program.parseAsync(process.argv);
}

main().catch((err: unknown) => {
  process.stderr.write(`certbroker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
