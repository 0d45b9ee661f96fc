import { CLIENT_USAGE } from './client/commands.js';
import { VERSION } from '@niclab/shared/runtime/version';

/** `niclab --help`: every command, the services' and the scripting ones; `niclab CMD --help` prints its blocks (help.ts). */
export const USAGE = `niclab ${VERSION}: benchmark network interfaces across lab hosts

Usage:
  niclab start                 API + coordinator + a local agent (id "local"), and a private
                               redis-server when REDIS_URL is unset
  niclab api [--no-coordinator]
                               the REST API on NICLAB_HOST:NICLAB_PORT (default 127.0.0.1:8080)
  niclab agent [--id ID]       an agent for this host (default id: NICLAB_AGENT_ID or the hostname)
  niclab coordinator           a coordinator alone (turns jobs into runs)
  niclab lab up [--hosts 4] [--rate 100mbit|A=100mbit,B=1gbit|none] [--name nl]
                [--labels "A,B,C:rack=a;D,E,F:rack=b"] [--file-dir DIR]
                               (root) a virtual lab: one network namespace and agent per host;
                               --file-dir: each agent's NICLAB_FILE_DIR is DIR/<host> (made)
  niclab lab add [--labels rack=a] [--rate 100mbit|none] [--name nl]
                               (root) one more host on a lab that is up, its agent with those labels
  niclab lab status [--name nl] [--json]
  niclab lab down [--name nl]
  niclab token NAME [--scope read|run|admin]
                               a new API token, and its policy-file entry (the API keeps only the hash)
  niclab completion bash|zsh   a shell completion script: source <(niclab completion bash)

${CLIENT_USAGE}

Environment: REDIS_URL (redis://host:port, rediss://…, unix:///path), NICLAB_REDIS_SENTINELS and
NICLAB_REDIS_MASTER (Sentinel), NICLAB_REDIS_WAIT_REPLICAS, NICLAB_REDIS_WAIT_MS, NICLAB_PREFIX, NICLAB_HOST,
NICLAB_PORT, NICLAB_AGENT_ID, NICLAB_HEARTBEAT_SECONDS, NICLAB_SETUP_SECONDS, NICLAB_TASK_LOCK_SECONDS,
NICLAB_LOG_LEVEL, NICLAB_LAB,
NICLAB_DATA_DIR, NICLAB_COORDINATOR, NICLAB_RETENTION_DAYS, NICLAB_RETENTION_JOBS,
NICLAB_RESULTS_RETENTION_DAYS, NICLAB_POLICY_FILE, NICLAB_AUTH, NICLAB_TLS_CERT_FILE,
NICLAB_TLS_KEY_FILE, NICLAB_AGENT_LABELS, NICLAB_API, NICLAB_TOKEN. See README.md.`;
