"""Whether an output dir's file locks reach other nodes, from mountinfo lines as NFS, Lustre and BeeGFS
clients write them (no such mount exists here, so the lines are written out; the parser reads this
machine's real /proc/self/mountinfo too).

Writes nothing.
"""

from __future__ import annotations

from pathlib import Path

from mle_world.launch.mounts import lock_warning, node_local_locks, parse_mountinfo

MOUNTINFO = "\n".join(
    [
        "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard",
        "40 22 0:40 / /home rw,relatime shared:20 - nfs4 srv:/home rw,vers=4.2,local_lock=none,addr=10.0.0.1",
        "41 22 0:41 / /nfs3 rw,relatime shared:21 - nfs srv:/x rw,vers=3,nolock,local_lock=all,addr=10.0.0.2",
        "42 22 0:42 / /scratch rw shared:22 - lustre 10.0.0.3@o2ib:/fs rw,localflock,lazystatfs",
        "43 42 0:43 / /scratch/good rw shared:23 - lustre 10.0.0.3@o2ib:/fs2 rw,flock,lazystatfs",
        r"44 22 0:44 / /my\040runs rw shared:24 - nfs4 srv:/r rw,vers=4.1,local_lock=flock",
        "45 22 0:45 / /beegfs rw shared:25 - beegfs beegfs_nodev rw,cfgFile=/etc/beegfs/beegfs-client.conf",
    ]
)


def test_node_local_locks_from_the_mount_options() -> None:
    reason = {p: node_local_locks(Path(p), MOUNTINFO) for p in ("/home/u/runs", "/nfs3/runs", "/scratch/u")}
    assert reason == {
        "/home/u/runs": None,  # NFSv4 without local_lock: its locks are the server's
        "/nfs3/runs": "nfs mounted with local_lock=all (/nfs3)",
        "/scratch/u": "lustre mounted with localflock (/scratch)",
    }
    assert node_local_locks(Path("/scratch/good/runs"), MOUNTINFO) is None  # the deeper mount decides
    assert (
        node_local_locks(Path("/my runs/paper"), MOUNTINFO) == "nfs4 mounted with local_lock=flock (/my runs)"
    )
    assert "tuneUseGlobalFileLocks" in (node_local_locks(Path("/beegfs/x"), MOUNTINFO) or "")
    assert node_local_locks(Path("/tmp/x"), MOUNTINFO) is None


def test_the_warning_names_the_dir_and_what_to_use_instead() -> None:
    line = lock_warning(Path("/scratch/u/paper-gated"), MOUNTINFO)
    assert line is not None and "\n" not in line
    assert line.startswith(
        "--output-dir /scratch/u/paper-gated is on lustre mounted with localflock (/scratch): "
    )
    assert "Lustre mounted with flock" in line


def test_this_machines_mounts_parse(tmp_path: Path) -> None:
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    assert any(m.point == "/" for m in mounts)
    assert node_local_locks(tmp_path / "not yet made") is None  # a local disk: no warning


def test_a_mounts_root_is_its_file_systems_dir_unescaped() -> None:
    """What `memory_cgroup` finds a trial's cgroup with: a container sees its own cgroup as its root."""
    line = "35 30 0:30 /job\\040a /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
    (mount,) = parse_mountinfo(line)
    assert (mount.root, mount.point, mount.fstype) == ("/job a", "/sys/fs/cgroup", "cgroup2")
