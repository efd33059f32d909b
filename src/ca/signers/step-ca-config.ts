/**
 * The step-ca signer's settings (`certbroker ca --signer step-ca ...`): flags over env vars, every
 * problem reported through the CA's one `ConfigReader` so `readCaConfig` lists them all at once.
 */
import type { ConfigReader } from '../../core/config.js';
import { DEFAULT_STEP_CA_TIMEOUT_MS } from './step-ca-client.js';

export const STEP_CA_ENV = Object.freeze({
  URL: 'CA_STEP_CA_URL',
  ROOT: 'CA_STEP_CA_ROOT',
  PROVISIONER: 'CA_STEP_CA_PROVISIONER',
  PROVISIONER_KEY_FILE: 'CA_STEP_CA_PROVISIONER_KEY_FILE',
  PROVISIONER_KEY_PASSWORD_FILE: 'CA_STEP_CA_PROVISIONER_KEY_PASSWORD_FILE',
  TIMEOUT_SECONDS: 'CA_STEP_CA_TIMEOUT_SECONDS',
});

/** What `SignerConfig` `{ kind: 'step-ca' }` carries (step-ca-signer.ts reads the files at start). */
export interface StepCaSettings {
  /** `https://host[:port]`: step-ca's address; `<url>/1.0/sign` is the tokens' audience. */
  readonly url: string;
  /** PEM roots: step-ca's TLS certificate and the leaves it issues must chain to them. */
  readonly rootFile: string;
  /** The JWK provisioner's name in step-ca's ca.json. */
  readonly provisioner: string;
  /** The provisioner's private JWK (JSON), or its JWE when `provisionerKeyPasswordFile` is given. */
  readonly provisionerKeyFile: string;
  readonly provisionerKeyPasswordFile?: string;
  /** Per-request deadline; default DEFAULT_STEP_CA_TIMEOUT_MS (10 s). */
  readonly timeoutMs?: number;
}

export interface StepCaFlags {
  readonly stepCaUrl?: string;
  readonly stepCaRoot?: string;
  readonly provisioner?: string;
  readonly provisionerKeyFile?: string;
  readonly provisionerKeyPasswordFile?: string;
}

/** A problem with `url` as step-ca's address, or undefined. */
function stepCaUrlProblem(url: string, name: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `${name}=${JSON.stringify(url)} is not a URL`;
  }
  if (parsed.protocol !== 'https:') return `${name}=${JSON.stringify(url)} must be an https:// URL (step-ca serves TLS only)`;
  if (parsed.search !== '' || parsed.hash !== '' || parsed.username !== '' || parsed.password !== '') {
    return `${name}=${JSON.stringify(url)} must be scheme, host, port and path only`;
  }
  return undefined;
}

/** Reads and checks the settings; call only when the signer kind is step-ca. */
export function readStepCaSettings(r: ConfigReader, flags: StepCaFlags): StepCaSettings {
  const required = (name: string, flag: string, explicit: string | undefined): string => {
    const value = r.raw(name, explicit);
    if (value === undefined) r.problem(`${name} (${flag}) is required with the step-ca signer`);
    return value ?? '';
  };
  const url = required(STEP_CA_ENV.URL, '--step-ca-url', flags.stepCaUrl);
  const problem = url === '' ? undefined : stepCaUrlProblem(url, STEP_CA_ENV.URL);
  if (problem) r.problem(problem);
  const rootFile = required(STEP_CA_ENV.ROOT, '--step-ca-root', flags.stepCaRoot);
  const provisioner = required(STEP_CA_ENV.PROVISIONER, '--provisioner', flags.provisioner);
  const provisionerKeyFile = required(STEP_CA_ENV.PROVISIONER_KEY_FILE, '--provisioner-key-file', flags.provisionerKeyFile);
  const provisionerKeyPasswordFile = r.optionalString(STEP_CA_ENV.PROVISIONER_KEY_PASSWORD_FILE, flags.provisionerKeyPasswordFile);
  const timeoutSeconds = r.int(STEP_CA_ENV.TIMEOUT_SECONDS, DEFAULT_STEP_CA_TIMEOUT_MS / 1000, { min: 1, max: 300 });
  return Object.freeze({
    url,
    rootFile,
    provisioner,
    provisionerKeyFile,
    ...(provisionerKeyPasswordFile !== undefined ? { provisionerKeyPasswordFile } : {}),
    timeoutMs: timeoutSeconds * 1000,
  });
}
