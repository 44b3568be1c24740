import { parseImageReference, splitRegistry } from '@gpufarm/shared';
import { type SimpleCommand, optionsOf } from './command-words.js';
import { quote, type Signal } from './findings.js';

/**
 * The `privilege_request` rule. The spec has no field for privileged mode, capabilities or
 * devices: a job gets an unprivileged container. This rule refuses jobs that try anyway, from
 * the command, the env or the image:
 * - programs that only work with host privileges: `nsenter`, `mount` (except listing) and `umount`, `modprobe`,
 *   `insmod`, `rmmod`, `setcap`, `kexec`, firewall tools, `capsh` beyond printing, `sysctl`
 *   writes, and container runtimes inside the job (`docker`, `dockerd`, `podman`, `ctr`, …);
 * - host paths: container runtime sockets (`/var/run/docker.sock`), `/proc/sysrq-trigger`,
 *   `/proc/kcore`, kernel escape hooks (`core_pattern`, `release_agent`, `uevent_helper`),
 *   `/dev/mem`, raw disks, and `/host` or `/hostfs` mounts (`chroot /host`);
 * - container-runtime flags anywhere (`--privileged`, `--cap-add`, `--pid=host`,
 *   `--security-opt seccomp=unconfined`), as an entrypoint may pass them on;
 * - env the NVIDIA runtime or a Docker client reads: `NVIDIA_VISIBLE_DEVICES` (it would pick
 *   GPUs other than the assigned ones), `NVIDIA_MIG_CONFIG_DEVICES` and
 *   `NVIDIA_MIG_MONITOR_DEVICES` (MIG management), `DOCKER_HOST`, `CONTAINER_HOST`;
 * - Docker-in-Docker images (`docker:dind`, `*-dind`), which need a privileged container.
 *
 * Deliberately allowed: `sudo` and `su` (common in development images, harmless without
 * capabilities), `chroot` into the job's own directories, `CUDA_VISIBLE_DEVICES` (it only narrows
 * the assigned GPUs), and `NVIDIA_DRIVER_CAPABILITIES` (driver libraries such as `graphics` and
 * `video` that rendering jobs need, not host privileges; the agent decides what it honours).
 */

const PRIVILEGED_PROGRAMS: ReadonlyMap<string, string> = new Map([
  ['nsenter', "enters another process's namespaces"],
  ['mount', 'mounts file systems'],
  ['umount', 'unmounts file systems'],
  ['modprobe', 'loads kernel modules'],
  ['insmod', 'loads kernel modules'],
  ['rmmod', 'unloads kernel modules'],
  ['setcap', 'grants file capabilities'],
  ['kexec', 'loads another kernel'],
  ['iptables', 'changes firewall rules'],
  ['ip6tables', 'changes firewall rules'],
  ['nft', 'changes firewall rules'],
  // Not `ctr` (containerd's CLI): too common a name for click-through-rate models.
  ...['docker', 'dockerd', 'containerd', 'runc', 'crictl', 'podman', 'nerdctl'].map(
    (name) => [name, 'runs containers inside the job, which needs the host container runtime or a privileged container'] as const,
  ),
]);

/** capsh options that only print; anything else changes capabilities or the user. */
const CAPSH_INFORMATIONAL = /^--(?:print|current|help|decode=.*|supports=.*|has-[a-z]=.*|explain=.*)$/;
const SYSCTL_WRITES: ReadonlySet<string> = new Set(['-w', '--write', '-p', '--load', '--system']);

const HOST_NAMESPACE_OPTIONS: ReadonlySet<string> = new Set(['--pid', '--net', '--network', '--ipc', '--userns', '--uts', '--cgroupns']);

const HOST_PATHS: readonly { pattern: RegExp; what: string }[] = [
  { pattern: /\b(?:docker|containerd|crio|podman|cri-dockerd|dockershim)\.sock\b/i, what: 'the container runtime socket' },
  { pattern: /\/proc\/sysrq-trigger\b/, what: "the kernel's sysrq trigger" },
  { pattern: /\/proc\/kcore\b/, what: 'kernel memory' },
  { pattern: /\/proc\/sys\/kernel\/(?:core_pattern|modprobe)\b|\/sys\/kernel\/uevent_helper\b|\/release_agent\b/, what: 'a kernel hook that runs programs on the host' },
  { pattern: /\/dev\/(?:mem|kmem|port)\b/, what: 'physical memory' },
  { pattern: /\/dev\/(?:sd[a-z]|vd[a-z]|xvd[a-z]|hd[a-z]|nvme[0-9]|dm-[0-9]|mapper\/|disk\/)/, what: 'a raw disk device' },
  { pattern: /(?:^|[\s=:'"(,;<>])\/(?:host|hostfs)(?=$|[/\s:'",;)])/, what: 'the host file system' },
];

const RUNTIME_ENV: ReadonlyMap<string, string> = new Map([
  ['NVIDIA_VISIBLE_DEVICES', 'selects GPUs through the NVIDIA container runtime; the platform assigns GPUs (CUDA_VISIBLE_DEVICES may narrow them)'],
  ['NVIDIA_MIG_CONFIG_DEVICES', 'asks the NVIDIA container runtime for MIG configuration, a privileged operation'],
  ['NVIDIA_MIG_MONITOR_DEVICES', 'asks the NVIDIA container runtime for MIG monitoring, a privileged operation'],
  ['DOCKER_HOST', 'points a Docker client at a container daemon'],
  ['CONTAINER_HOST', 'points a Podman client at a container daemon'],
]);

/** Privilege requests among the simple commands (from the argv and the env values). */
export function commandPrivilegeSignals(commands: readonly SimpleCommand[]): Signal[] {
  const signals: Signal[] = [];
  const add = (field: string, phrase: string) => signals.push({ rule: 'privilege_request', field, phrase });
  for (const command of commands) {
    const name = command.programName;
    const args = command.args.map((w) => w.text);
    if (command.program !== null && name !== null) {
      const what = PRIVILEGED_PROGRAMS.get(name);
      // `mount` alone (or `mount -l`) only lists mounts.
      const listing = name === 'mount' && args.every((a) => a === '-l' || a === '--show-labels');
      if (what !== undefined && !listing) add(command.program.field, `runs ${name}, which ${what}`);
      if (name === 'capsh' && !args.every((a) => CAPSH_INFORMATIONAL.test(a))) add(command.program.field, 'runs capsh to change capabilities');
      if (name === 'sysctl' && args.some((a) => SYSCTL_WRITES.has(a) || (!a.startsWith('-') && a.includes('=')))) {
        add(command.program.field, 'runs sysctl to write kernel parameters');
      }
    }
    for (const option of optionsOf(command)) {
      const value = option.value ?? '';
      if (option.name === '--privileged') add(option.field, 'asks for a privileged container (--privileged)');
      else if (option.name === '--cap-add') add(option.field, `adds capabilities (--cap-add${value === '' ? '' : ` ${value}`})`);
      else if (option.name === '--security-opt' && /unconfined/i.test(value)) add(option.field, `turns off confinement (--security-opt ${value})`);
      else if (HOST_NAMESPACE_OPTIONS.has(option.name) && value === 'host') add(option.field, `asks for a host namespace (${option.name}=host)`);
    }
  }
  return signals;
}

/** Host paths in one argv element or env value. */
export function pathPrivilegeSignals(text: string, field: string): Signal[] {
  const signals: Signal[] = [];
  for (const { pattern, what } of HOST_PATHS) {
    const match = pattern.exec(text);
    if (match !== null) signals.push({ rule: 'privilege_request', field, phrase: `refers to ${what} (${quote(tokenAround(text, match.index, match[0].length))})` });
  }
  return signals;
}

/** The whitespace- or quote-delimited token of `text` that holds the match at `index`. */
function tokenAround(text: string, index: number, length: number): string {
  const delimiter = /[\s'"]/;
  let start = delimiter.test(text[index] ?? '') && length > 0 ? index + 1 : index;
  while (start > 0 && !delimiter.test(text[start - 1] ?? '')) start -= 1;
  let end = Math.max(start, index + length);
  while (end < text.length && !delimiter.test(text[end] ?? '')) end += 1;
  return text.slice(start, end).trim();
}

/** Env names that the container runtime or a container client acts on. */
export function envPrivilegeSignals(name: string, field: string): Signal[] {
  const what = RUNTIME_ENV.get(name.toUpperCase());
  return what === undefined ? [] : [{ rule: 'privilege_request', field, phrase: `${name} ${what}` }];
}

/** A Docker-in-Docker image: the official `docker` image with a `dind` tag, or a `dind` word in the path. */
export function imagePrivilegeSignals(image: string): Signal[] {
  const ref = parseImageReference(image);
  if (ref === null) return [];
  const { registry, path } = splitRegistry(ref.name);
  const officialDind = registry === null && path === 'docker' && ref.tag !== null && /(?:^|[-_.])dind(?:$|[-_.])/.test(ref.tag.toLowerCase());
  const dindPath = path.split(/[/._-]+/).includes('dind');
  if (!officialDind && !dindPath) return [];
  return [{ rule: 'privilege_request', field: 'image', phrase: `${quote(image)} runs Docker-in-Docker, which needs a privileged container` }];
}
