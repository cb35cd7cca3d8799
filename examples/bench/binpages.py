#!/usr/bin/python3
"""binpages.py PID: which pages of a process's own executable are mapped
(present in its page table, so counted in RssFile), per ELF section, and
in how many 64 KiB blocks.

The kernel maps a file page on first touch and, with it, the neighbours
that are already in the page cache (fault-around, 64 KiB by default): a
block whose 16 pages are all present was most likely mapped by one touch.
Reads /proc/PID/maps and /proc/PID/pagemap (root: the present bit is
readable without privileges, the frame numbers are not needed) and the
sections from `readelf -SW`.

    sudo examples/bench/binpages.py "$(pgrep -xo edgemux)"
"""
import re
import struct
import subprocess
import sys

PAGE = 4096
BLOCK = 64 << 10


def sections(path):
    out = subprocess.check_output(["readelf", "-SW", path], text=True)
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and int(m.group(2), 16):
            yield m.group(1), int(m.group(2), 16), int(m.group(3), 16)


def present_pages(pid, exe):
    pages = []
    with open(f"/proc/{pid}/pagemap", "rb") as pm, open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) < 6 or parts[5] != exe:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            for va in range(lo, hi, PAGE):
                pm.seek(va // PAGE * 8)
                if struct.unpack("<Q", pm.read(8))[0] >> 63:
                    pages.append(va)
    return pages


def main():
    pid = int(sys.argv[1])
    exe = subprocess.check_output(["readlink", f"/proc/{pid}/exe"], text=True).strip()
    pages = present_pages(pid, exe)
    mib = lambda n: n * PAGE / (1 << 20)
    print(f"{exe}: {mib(len(pages)):.2f} MiB of its pages mapped")
    for name, addr, size in sections(exe):
        n = sum(1 for va in pages if va < addr + size and addr < va + PAGE)
        if n:
            print(f"  {name:<14} {mib(n):6.2f} of {size / (1 << 20):6.2f} MiB")
    blocks = {}
    for va in pages:
        blocks[va // BLOCK] = blocks.get(va // BLOCK, 0) + 1
    full = sum(1 for n in blocks.values() if n == BLOCK // PAGE)
    print(f"  64 KiB blocks touched: {len(blocks)}, all 16 pages present in {full}")


if __name__ == "__main__":
    main()
