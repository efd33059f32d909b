/**
 * The options a command line gave: commander leaves an option that was not given undefined, and
 * the run functions read "absent" as "take the environment's value", so only the given keys go on.
 */
export function givenOptions<T extends object, K extends keyof T>(opts: T, keys: readonly K[]): Pick<T, K> {
  return Object.fromEntries(keys.filter((k) => opts[k] !== undefined).map((k) => [k, opts[k]])) as Pick<T, K>;
}
