#!/usr/bin/env node
/**
 * The Debian packages niclab needs, in one place: `npm start` checks the `start` set before it
 * builds, `npm test` the `test` set, `.ci/run` the `ci` set (the tests' and what makes the
 * container base images). What is missing is installed with apt-get when that may be done
 * (root, on Debian); otherwise this stops at once, before anything starts, with the command to
 * run. Plain JavaScript, so it runs before `npm run build`.
 *
 *   node deploy/system-packages.mjs start|test|ci
 *
 * NICLAB_SKIP_PACKAGES=1 skips the check (a machine that has what it needs elsewhere on PATH);
 * NICLAB_PACKAGES_DRY_RUN=1 says what it would install and installs nothing.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Each need: a command on PATH (or a check that must exit 0), the packages that provide it, and why. */
const START = [
  { command: 'redis-server', packages: ['redis-server'], why: 'npm start runs a private redis-server when REDIS_URL is unset', unlessSet: ['REDIS_URL', 'NICLAB_REDIS_SENTINELS'] },
  { command: 'ip', packages: ['iproute2'], why: "the agent reads its interfaces' addresses" },
  { command: 'tc', packages: ['iproute2'], why: 'the agent reads and sets queueing disciplines' },
  { command: 'iperf3', packages: ['iperf3'], why: 'the iperf3 engine' },
  { command: 'ethtool', packages: ['ethtool'], why: "the agent reads each interface's driver, offloads and counters" },
  { command: 'setpriv', packages: ['util-linux'], why: 'engines die with their agent (--pdeathsig)' },
  { command: 'ping', packages: ['iputils-ping'], why: "the agent proves a path carries a run's MTU (ping -M do) before it measures at it" },
  { command: 'chattr', packages: ['e2fsprogs'], why: "an iperf3 sink with ioMode dsync is made synchronous by its file's S attribute (chattr +S)" },
];
const TEST = [
  ...START,
  { command: 'irtt', packages: ['irtt'], why: 'the reference for round trips in the latency, queue and probe lab tests' },
  { command: 'openssl', packages: ['openssl'], why: 'the HTTPS test makes a self-signed certificate' },
  { command: 'curl', packages: ['curl'], why: "the README's tour, which a test runs" },
  { command: 'jq', packages: ['jq'], why: "the README's tour" },
  { command: 'prometheus', packages: ['prometheus'], why: 'a real Prometheus for the metrics tests' },
  { command: 'promtool', packages: ['prometheus'], why: 'the rules are checked with promtool' },
  { command: 'prometheus-alertmanager', packages: ['prometheus-alertmanager'], why: 'a real Alertmanager: an alert must reach a receiver' },
  { command: 'amtool', packages: ['prometheus-alertmanager'], why: "Alertmanager's configuration is checked with amtool" },
  { command: 'chromium', packages: ['chromium'], why: 'the /ui tests drive it with playwright-core (no browser download)' },
  { command: 'podman', packages: ['podman'], why: "the container suite builds and runs the image" },
  { command: 'runc', packages: ['runc'], why: "podman's runtime" },
  { command: 'systemd-analyze', packages: ['systemd'], why: "the agent's systemd unit is verified and rated" },
  { command: 'ansible-playbook', packages: ['ansible-core'], why: "the agents' playbook is checked and run against localhost" },
  { command: 'zsh', packages: ['zsh'], why: '`niclab completion zsh` is sourced into it' },
  { command: 'mkfs.ext4', packages: ['e2fsprogs'], why: 'the disk lab test makes a file system on a loop device for each end' },
  { command: 'losetup', packages: ['mount'], why: "the disk lab test's loop devices" },
  { command: 'fincore', packages: ['util-linux-extra'], why: "the cache drop's test reads what of a file the page cache holds" },
  { command: 'python3', packages: ['python3'], why: 'the Python client is tested with it' },
  // Apache Otava's own change-point code (test/fixtures/otava) is the reference of the port.
  { check: ['python3', '-c', 'import numpy, scipy'], packages: ['python3-numpy', 'python3-scipy'], why: "Apache Otava's change-point code, the reference of niclab's port" },
];
const CI = [
  ...TEST,
  { command: 'debootstrap', packages: ['debootstrap'], why: "the lab's prepare-base-images.sh makes the container base image with it" },
];
export const NEEDS = { start: START, test: TEST, ci: CI };

function onPath(command) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      // not in this one
    }
  }
  return false;
}

const met = (need) => (need.command ? onPath(need.command) : spawnSync(need.check[0], need.check.slice(1), { stdio: 'ignore' }).status === 0);

/** The packages `set` needs that this machine lacks, with why. */
export function missing(set) {
  // A need some setting makes moot (a Redis of one's own): not asked for when it is set, but for the tests.
  const lacking = NEEDS[set].filter((need) => !(set === 'start' && need.unlessSet?.some((name) => process.env[name])) && !met(need));
  return { packages: [...new Set(lacking.flatMap((n) => n.packages))], why: lacking.map((n) => `${n.command ?? n.check.join(' ')}: ${n.why}`) };
}

function main(set) {
  if (!(set in NEEDS)) {
    console.error(`usage: node deploy/system-packages.mjs ${Object.keys(NEEDS).join('|')}`);
    return 2;
  }
  if (process.env.NICLAB_SKIP_PACKAGES === '1') return 0;
  const { packages, why } = missing(set);
  if (packages.length === 0) return 0;
  const install = ['apt-get', 'install', '-y', '--no-install-recommends', ...packages];
  const mayInstall = process.getuid?.() === 0 && existsSync('/etc/debian_version') && onPath('apt-get');
  if (!mayInstall) {
    console.error(`niclab (npm ${set === 'ci' ? 'test' : set}) needs system packages this machine lacks:\n${why.map((w) => `  ${w}`).join('\n')}\nInstall them, then run it again:\n  sudo apt-get update && sudo ${install.join(' ')}\n(or set NICLAB_SKIP_PACKAGES=1 to go on without them)`);
    return 1;
  }
  console.error(`installing: ${packages.join(' ')}\n${why.map((w) => `  ${w}`).join('\n')}`);
  if (process.env.NICLAB_PACKAGES_DRY_RUN === '1') return console.error(`would run: apt-get update -qq && ${install.join(' ')}`), 0;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const argv of [['apt-get', 'update', '-qq'], [...install.slice(0, 3), '-qq', ...install.slice(3)]]) {
    const run = spawnSync(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'inherit'], env });
    if (run.status !== 0) {
      console.error(`${argv.join(' ')} failed (exit ${run.status ?? run.signal})`);
      return 1;
    }
  }
  const still = missing(set);
  if (still.packages.length > 0) {
    console.error(`still missing after apt-get install: ${still.why.join('; ')}`);
    return 1;
  }
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = main(process.argv[2]);
