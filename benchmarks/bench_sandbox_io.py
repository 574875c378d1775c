"""How much memory does the harness hold to read or download a large file from a sandbox?

    python benchmarks/bench_sandbox_io.py [--runtimes bwrap docker:rubric-test-base:bookworm] [--mb 300]

Per runtime, a file of `--mb` MB is made in a sandbox, then read and downloaded two ways:
- baseline: the path before output was bounded, rebuilt here: `read` gathered `cat`'s output in
  a bytearray and copied it to bytes (Docker: aiodocker's `get_archive`, which reads the whole tar
  into memory, then extracted it); `download` gathered `tar`'s output the same way, then
  extracted the file from that buffer in one piece;
- now: `Sandbox.read(path, max_bytes=None)` and `Sandbox.download(path, local)`.
Each arm runs in a fresh Python process that reports how far its resident set rose above where
it started (the peak, VmHWM, reset through /proc/self/clear_refs). Printed: MB held per arm and
the ratio baseline / now. Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.runtimes import Sandbox, get_runtime
from harness.runtimes._base import _PACK, Capture

MB = 1 << 20
ARMS = ["baseline read", "now read", "baseline download", "now download"]


class _WholeCopy(Capture):
    """The capture of before: every byte in a bytearray, copied to bytes at the end."""

    def __init__(self) -> None:
        super().__init__(None)
        self.held = bytearray()

    def add(self, chunk: bytes) -> None:
        self.held.extend(chunk)

    def value(self) -> bytes:
        return bytes(self.held)


async def _baseline_read(box: Sandbox, path: str) -> bytes:
    if box.kind == "docker":
        archive = await box._container.get_archive(box.resolve(path))  # type: ignore[attr-defined]
        with archive:
            member = archive.next()
            assert member is not None
            extracted = archive.extractfile(member)
            assert extracted is not None
            data: bytes = extracted.read()
            return data
    return (await box._checked_run(["cat", "--", box.resolve(path)], out=_WholeCopy())).stdout


async def _baseline_download(box: Sandbox, path: str, local: Path) -> None:
    raw = await box._checked_run(["/bin/sh", "-c", _PACK, "sh", box.resolve(path)], out=_WholeCopy())
    with tarfile.open(fileobj=io.BytesIO(raw.stdout)) as archive:
        extracted = archive.extractfile(archive.getmembers()[0])
        assert extracted is not None
        local.write_bytes(extracted.read())


def _resident(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


async def _arm(spec: str, arm: str, size: int) -> int:
    """Bytes the resident set rose by while `arm` moved a `size`-byte file out of a sandbox."""
    async with get_runtime(spec).sandbox() as box:
        made = await box.exec(f"head -c {size} /dev/urandom > big.bin")
        assert made.ok, made.stderr
        with tempfile.TemporaryDirectory() as folder:
            local = Path(folder) / "big.bin"
            Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from here
            before = _resident("VmRSS")
            if arm == "baseline read":
                got = len(await _baseline_read(box, "big.bin"))
            elif arm == "now read":
                got = len(await box.read("big.bin", max_bytes=None))
            elif arm == "baseline download":
                await _baseline_download(box, "big.bin", local)
                got = local.stat().st_size
            else:
                await box.download("big.bin", local)
                got = local.stat().st_size
            grown = _resident("VmHWM") - before
    assert got == size, (arm, got, size)
    return grown


def _measure(spec: str, arm: str, size: int) -> int:
    """Run one arm in a fresh process (its peak is its own)."""
    done = subprocess.run(
        [sys.executable, __file__, "--arm", arm, "--runtimes", spec, "--mb", str(size // MB)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{spec} {arm} failed:\n{done.stderr[-2000:]}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["grown"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runtimes", nargs="+", default=["bwrap", "docker:rubric-test-base:bookworm"])
    parser.add_argument("--mb", type=int, default=300, help="the file's size in MB")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # one arm, in a child process
    args = parser.parse_args()
    size = args.mb * MB
    if args.arm:
        print(json.dumps({"grown": asyncio.run(_arm(args.runtimes[0], args.arm, size))}))
        return
    print(f"a {args.mb} MB file out of a sandbox: MB the harness's resident set rose by")
    for spec in args.runtimes:
        held = {arm: _measure(spec, arm, size) for arm in ARMS}
        for what in ("read", "download"):
            before, now = held[f"baseline {what}"], held[f"now {what}"]
            print(
                f"  {spec:36} {what:9} baseline {before / MB:7.0f} MB   now {now / MB:7.0f} MB   "
                f"{before / max(now, MB):5.1f}x less"
            )


if __name__ == "__main__":
    if not sys.platform.startswith("linux") or not os.path.exists("/proc/self/clear_refs"):
        raise SystemExit("bench_sandbox_io measures /proc/self/status: Linux only")
    main()
