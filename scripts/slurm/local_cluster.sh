#!/usr/bin/env bash
# Single-node real Slurm (Debian 12 packages, 22.05) for the launch tests and benchmarks:
# munged, MariaDB + slurmdbd (sacct, which submitit needs), slurmctld and slurmd with fake GPUs.
#
# Usage (as root):  bash scripts/slurm/local_cluster.sh up [--pyxis]|down [--purge]|status
#   up      install missing packages, write /etc/slurm/{slurm,gres,slurmdbd}.conf, start the
#           daemons and wait until the node is idle; a second `up` is a no-op.
#           --pyxis enables the pyxis SPANK plugin (a `required` line in /etc/slurm/plugstack.conf,
#           runtime dirs /run/pyxis and /run/enroot); `up` without it removes that line again.
#           pyxis and enroot must be installed (scripts/install_runtimes.sh).
#   down    remove the pyxis line, stop the daemons this script started (by pid file);
#           --purge also deletes the state dir
#   status  print daemon, node and pyxis state; exit 1 when the cluster is not usable
#
# Environment (all optional):
#   MLEW_SLURM_DIR      state, logs, pid files, fake GPU nodes, MariaDB datadir (/tmp/mlew-slurm)
#   MLEW_SLURM_CPUS     CPUs the node claims (16; config_overrides lets it exceed the hardware)
#   MLEW_SLURM_GPUS     fake GPUs, char devices c 1 3 bound by Slurm as gres/gpu (4)
#   MLEW_SLURM_MEM_MB   RealMemory the node claims (512000)
#   MLEW_SLURM_DBPORT   MariaDB port on 127.0.0.1 (3307, away from a system MariaDB)
#   MLEW_SLURM_INSTALL  1 = apt-get install missing packages (1)
#   MLEW_SLURM_FORCE    1 = overwrite an /etc/slurm/slurm.conf this script did not write (0)
#   MLEW_PYXIS_PLUGIN   the plugin `up --pyxis` enables (/usr/local/lib/slurm/spank_pyxis.so)
set -euo pipefail

STATE_DIR=${MLEW_SLURM_DIR:-/tmp/mlew-slurm}
CPUS=${MLEW_SLURM_CPUS:-16}
GPUS=${MLEW_SLURM_GPUS:-4}
MEM_MB=${MLEW_SLURM_MEM_MB:-512000}
DBPORT=${MLEW_SLURM_DBPORT:-3307}
INSTALL=${MLEW_SLURM_INSTALL:-1}
FORCE=${MLEW_SLURM_FORCE:-0}
CONF_DIR=/etc/slurm # the path Debian's clients read by default, so no SLURM_CONF is needed
MARKER="# written by mle-world scripts/slurm/local_cluster.sh"
HOST=$(hostname -s)
DB_SOCKET="$STATE_DIR/mysql/mysqld.sock"
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
PYXIS_PLUGIN=${MLEW_PYXIS_PLUGIN:-/usr/local/lib/slurm/spank_pyxis.so}
PLUGSTACK="$CONF_DIR/plugstack.conf"
PYXIS_MARKER="# pyxis, enabled by mle-world scripts/slurm/local_cluster.sh up --pyxis"

# The daemons started below must not inherit descriptors of the caller: `flock LOCK bash
# local_cluster.sh up` would otherwise leave the lock held by munged, mariadbd and slurmdbd forever.
for fd_path in "/proc/$$/fd/"*; do
  fd=${fd_path##*/}
  if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
done
unset fd_path fd

say() { printf '[local-slurm %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { say "error: $*"; exit "${2:-1}"; }

# A pid file names a live daemon only if the process exists and is not a zombie: without a real
# init as PID 1, killed daemons linger as zombies and `kill -0` would still succeed.
is_alive() {
  local pidfile=$1 pid state
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/stat ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z && $state != X ]]
}

pid_gone() { # a zombie counts as gone
  local state
  [[ -r /proc/$1/stat ]] || return 0
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
  [[ $state == Z || $state == X ]]
}

wait_for() { # wait_for TRIES SLEEP CMD... : retry CMD until it succeeds
  local tries=$1 pause=$2 i
  shift 2
  for ((i = 0; i < tries; i++)); do
    "$@" && return 0
    sleep "$pause"
  done
  return 1
}

file_nonempty() { [[ -s $1 ]]; }

stop_daemon() { # stop_daemon NAME PIDFILE
  local name=$1 pidfile=$2 pid
  if is_alive "$pidfile"; then
    pid=$(<"$pidfile")
    say "stopping $name (pid $pid)"
    kill "$pid" 2>/dev/null || true
    if ! wait_for 50 0.2 pid_gone "$pid"; then
      say "$name did not stop, SIGKILL"
      kill -9 "$pid" 2>/dev/null || true
      sleep 0.5
    fi
  fi
  rm -f "$pidfile"
}

install_packages() {
  local missing=() pkg
  for pkg in "${PACKAGES[@]}"; do
    [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" == 'install ok installed' ]] || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  [[ $INSTALL == 1 ]] || die "missing packages: ${missing[*]} (set MLEW_SLURM_INSTALL=1)" 3
  say "apt-get install ${missing[*]}"
  local aptlog="${TMPDIR:-/tmp}/mlew-slurm-apt.log"
  export DEBIAN_FRONTEND=noninteractive
  # Container images often ship a policy-rc.d that stops postinst from starting services;
  # that is fine, the daemons are started below.
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$aptlog" 2>&1; then
    apt-get update >>"$aptlog" 2>&1
    apt-get install -y --no-install-recommends "${missing[@]}" >>"$aptlog" 2>&1 ||
      die "apt-get install failed, see $aptlog" 3
  fi
}

start_munge() {
  if [[ ! -s /etc/munge/munge.key ]]; then
    say "creating the munge key"
    mungekey --create --keyfile=/etc/munge/munge.key
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    return 0
  fi
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged --force
  wait_for 50 0.1 file_nonempty /run/munge/munged.pid || die "munged wrote no pid file" 4
  cp /run/munge/munged.pid "$STATE_DIR/munged.pid"
  munge -n | unmunge >/dev/null || die "munge self-test failed" 4
  say "munged started (pid $(<"$STATE_DIR/munged.pid"))"
}

db_ready() { mariadb --socket="$DB_SOCKET" -uroot -e 'select 1' >/dev/null 2>&1; }

start_mariadb() {
  is_alive "$STATE_DIR/mysql/mariadbd.pid" && return 0
  if [[ ! -d $STATE_DIR/mysql/data/mysql ]]; then
    mkdir -p "$STATE_DIR/mysql/data"
    chown -R mysql:mysql "$STATE_DIR/mysql"
    say "initialising the MariaDB datadir"
    mariadb-install-db --user=mysql --datadir="$STATE_DIR/mysql/data" \
      --auth-root-authentication-method=socket --skip-test-db >"$STATE_DIR/log/mariadb-install.log" 2>&1
  fi
  chown -R mysql:mysql "$STATE_DIR/mysql"
  # Started directly (no systemd, no mysqld_safe): private datadir, socket and port.
  setsid /usr/sbin/mariadbd --user=mysql --datadir="$STATE_DIR/mysql/data" --socket="$DB_SOCKET" \
    --pid-file="$STATE_DIR/mysql/mariadbd.pid" --port="$DBPORT" --bind-address=127.0.0.1 \
    --log-error="$STATE_DIR/log/mariadb.err" --innodb-buffer-pool-size=64M --skip-log-bin \
    </dev/null >/dev/null 2>&1 &
  wait_for 150 0.2 db_ready || die "MariaDB did not start, see $STATE_DIR/log/mariadb.err" 4
  mariadb --socket="$DB_SOCKET" -uroot -e "
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'mlew-slurm';
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'mlew-slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
    FLUSH PRIVILEGES;"
  say "mariadbd started (pid $(<"$STATE_DIR/mysql/mariadbd.pid"))"
}

dbd_port_open() { (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null; }

start_slurmdbd() {
  local conf="$CONF_DIR/slurmdbd.conf"
  cat >"$conf.new" <<EOF
$MARKER
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
PidFile=$STATE_DIR/slurmdbd.pid
LogFile=$STATE_DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DBPORT
StorageUser=slurm
StoragePass=mlew-slurm
StorageLoc=slurm_acct_db
EOF
  # slurmdbd refuses a config readable by others or not owned by SlurmUser.
  chmod 600 "$conf.new"
  chown root:root "$conf.new"
  mv "$conf.new" "$conf"
  is_alive "$STATE_DIR/slurmdbd.pid" && return 0
  slurmdbd
  wait_for 100 0.1 file_nonempty "$STATE_DIR/slurmdbd.pid" || die "slurmdbd wrote no pid file" 4
  wait_for 100 0.2 dbd_port_open || die "slurmdbd does not listen, see $STATE_DIR/log/slurmdbd.log" 4
  say "slurmdbd started (pid $(<"$STATE_DIR/slurmdbd.pid"))"
}

make_fake_gpus() {
  # Character devices with /dev/null's numbers: Slurm only binds char/block devices as GRES
  # files (a regular file is rejected and then CUDA_VISIBLE_DEVICES is never set).
  local i dev
  mkdir -p "$STATE_DIR/fakegpu"
  for ((i = 0; i < GPUS; i++)); do
    dev="$STATE_DIR/fakegpu/gpu$i"
    [[ -c $dev ]] || { rm -f "$dev"; mknod -m 666 "$dev" c 1 3; }
  done
}

# Writes slurm.conf and gres.conf; returns 0 when either changed (the daemons must restart).
write_slurm_conf() {
  local gres_node="" gres_line=""
  if ((GPUS > 0)); then
    make_fake_gpus
    gres_node="Gres=gpu:$GPUS"
    gres_line="NodeName=$HOST Name=gpu File=$STATE_DIR/fakegpu/gpu[0-$((GPUS - 1))]"
  fi
  if [[ -f $CONF_DIR/slurm.conf ]] && ! grep -qF "$MARKER" "$CONF_DIR/slurm.conf" && [[ $FORCE != 1 ]]; then
    die "$CONF_DIR/slurm.conf was not written by this script; set MLEW_SLURM_FORCE=1 to replace it" 6
  fi
  # CR_Core (not CR_Core_Memory): without DefMemPerCPU the latter gives every job the whole node's
  # memory and array tasks would run one at a time. proctrack/linuxproc + task/none need no cgroups.
  # sched_interval=2 makes a freed array slot start the next task within seconds.
  cat >"$CONF_DIR/slurm.conf.new" <<EOF
$MARKER
ClusterName=mlewci
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE_DIR/state
SlurmdSpoolDir=$STATE_DIR/spool
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE_DIR/log/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
MaxArraySize=10001
MaxJobCount=100000
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM_MB $gres_node State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST Default=NO MaxTime=INFINITE State=UP
EOF
  printf '%s\nAutoDetect=off\n%s\n' "$MARKER" "$gres_line" >"$CONF_DIR/gres.conf.new"
  local changed=1
  if cmp -s "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf" && cmp -s "$CONF_DIR/gres.conf.new" "$CONF_DIR/gres.conf"; then
    changed=0
  fi
  mv "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"
  mv "$CONF_DIR/gres.conf.new" "$CONF_DIR/gres.conf"
  ((changed))
}

# srun and slurmstepd read plugstack.conf per step: no daemon restart is needed either way. A
# `required` plugin that is missing makes every step fail, so the line lives only while enabled.
disable_pyxis() {
  [[ -f $PLUGSTACK ]] && grep -qF "$PYXIS_MARKER" "$PLUGSTACK" || return 0
  grep -vF -e "$PYXIS_MARKER" -e "required $PYXIS_PLUGIN" "$PLUGSTACK" >"$PLUGSTACK.new" || true
  if [[ -s $PLUGSTACK.new ]]; then mv "$PLUGSTACK.new" "$PLUGSTACK"; else rm -f "$PLUGSTACK.new" "$PLUGSTACK"; fi
  say "pyxis disabled (line removed from $PLUGSTACK)"
}

enable_pyxis() {
  [[ -f $PYXIS_PLUGIN ]] || die "pyxis plugin $PYXIS_PLUGIN not found (run scripts/install_runtimes.sh)" 3
  command -v enroot >/dev/null || die "enroot not found on PATH (run scripts/install_runtimes.sh)" 3
  # pyxis fails every step with "Plugin initialization failed" when its runtime dir is missing.
  mkdir -p /run/pyxis /run/enroot
  if [[ -f $PLUGSTACK ]] && grep -qF "$PYXIS_MARKER" "$PLUGSTACK"; then
    return 0
  fi
  printf '%s\nrequired %s\n' "$PYXIS_MARKER" "$PYXIS_PLUGIN" >>"$PLUGSTACK"
  say "pyxis enabled ($PYXIS_PLUGIN in $PLUGSTACK)"
}

pyxis_enabled() { [[ -f $PLUGSTACK ]] && grep -qF "$PYXIS_MARKER" "$PLUGSTACK"; }

# The whole answer, then its first line: `sinfo | head -n1` could kill sinfo with SIGPIPE (pipefail: 141).
node_state() {
  local states
  states=$(sinfo -h -n "$HOST" -o %T 2>/dev/null) || return 1
  printf '%s\n' "${states%%$'\n'*}"
}

node_usable() {
  local state
  state=$(node_state || true)
  [[ $state == idle* || $state == mixed* || $state == alloc* ]]
}

up() {
  [[ $(id -u) == 0 ]] || die "must run as root" 2
  local pyxis=0
  case ${1:-} in
    --pyxis) pyxis=1 ;;
    "") ;;
    *) die "up: unknown option $1 (expected --pyxis)" 2 ;;
  esac
  local t0=$SECONDS
  install_packages
  mkdir -p "$STATE_DIR"/{state,spool,log} "$CONF_DIR"
  if ((pyxis)); then enable_pyxis; else disable_pyxis; fi
  chmod 755 "$STATE_DIR"
  start_munge
  start_mariadb
  start_slurmdbd
  if write_slurm_conf && { is_alive "$STATE_DIR/slurmctld.pid" || is_alive "$STATE_DIR/slurmd.pid"; }; then
    say "configuration changed, restarting slurmctld and slurmd"
    stop_daemon slurmd "$STATE_DIR/slurmd.pid"
    stop_daemon slurmctld "$STATE_DIR/slurmctld.pid"
  fi
  if ! is_alive "$STATE_DIR/slurmctld.pid"; then
    slurmctld -i # -i: ignore missing or stale state files from an earlier run
    wait_for 100 0.1 file_nonempty "$STATE_DIR/slurmctld.pid" || die "slurmctld wrote no pid file" 5
    say "slurmctld started (pid $(<"$STATE_DIR/slurmctld.pid"))"
  fi
  if ! is_alive "$STATE_DIR/slurmd.pid"; then
    slurmd
    wait_for 100 0.1 file_nonempty "$STATE_DIR/slurmd.pid" || die "slurmd wrote no pid file" 5
    say "slurmd started (pid $(<"$STATE_DIR/slurmd.pid"))"
  fi
  if ! wait_for 150 0.2 node_usable; then
    scontrol update nodename="$HOST" state=resume 2>/dev/null || true
    wait_for 50 0.2 node_usable || die "node $HOST is '$(node_state || true)', see $STATE_DIR/log" 5
  fi
  local with=""
  pyxis_enabled && with=", pyxis"
  say "cluster ready: node $HOST $(node_state), $GPUS fake GPUs$with, $((SECONDS - t0)) s"
}

down() {
  disable_pyxis
  stop_daemon slurmd "$STATE_DIR/slurmd.pid"
  stop_daemon slurmctld "$STATE_DIR/slurmctld.pid"
  stop_daemon slurmdbd "$STATE_DIR/slurmdbd.pid"
  stop_daemon mariadbd "$STATE_DIR/mysql/mariadbd.pid"
  stop_daemon munged "$STATE_DIR/munged.pid"
  if [[ ${1:-} == --purge ]]; then
    rm -rf "$STATE_DIR"
    say "removed $STATE_DIR"
  fi
}

status() {
  local name pidfile rc=0
  for name in munged slurmdbd slurmctld slurmd mysql/mariadbd; do
    pidfile="$STATE_DIR/$name.pid"
    if is_alive "$pidfile"; then echo "$name: running (pid $(<"$pidfile"))"; else echo "$name: stopped"; fi
  done
  if pyxis_enabled; then echo "pyxis: enabled ($PYXIS_PLUGIN)"; else echo "pyxis: disabled"; fi
  if command -v sinfo >/dev/null && node_usable; then
    echo "node $HOST: $(node_state)"
  else
    echo "node $HOST: not usable"
    rc=1
  fi
  return "$rc"
}

case ${1:-} in
  up) up "${2:-}" ;;
  down) down "${2:-}" ;;
  status) status ;;
  *) echo "usage: $0 up [--pyxis]|down [--purge]|status" >&2; exit 2 ;;
esac
