#!/usr/bin/env node
/**
 * The standalone `istio-iptables` executable (bundled with esbuild into a Node single
 * executable by the CNI packaging). Light on purpose: no commander, no Kubernetes client.
 */
import { runIstioIptables } from './run.js';

const controller = new AbortController();
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => controller.abort());

runIstioIptables(process.argv.slice(2), process.env, {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  signal: controller.signal,
}).then(
  (code) => {
    process.exitCode = code;
  },
  () => {
    process.exitCode = 1;
  },
);
