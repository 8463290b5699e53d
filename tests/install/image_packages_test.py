#!/usr/bin/env python3
"""The image's runtime packages cover every shared library its binaries load.

There is no container engine in CI, so the Dockerfile's runtime stage is checked here
instead of by building it: `cmake --install` the build tree, run ldd on every installed
ELF (and on UCX's transport modules, which libucs loads with dlopen), map each library
to its Debian package with `dpkg -S`, and compare with the Dockerfile's
RUNTIME_PACKAGES: a package that is needed and missing fails, and so does one listed
and not needed (the list stays what ldd derives). The CUDA libraries of the plugin
(libbaton_cuda.so, CUDA builds) come from NVIDIA's repository, not Debian's; they are
checked against CUDA_RUNTIME_PACKAGES by the table below.

usage: image_packages_test.py CMAKE BUILD_DIR SOURCE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# NVIDIA's Debian 12 packages of the CUDA libraries the plugin links (by soname stem),
# as the Dockerfile names them with its CUDA build argument (`-${CUDA}`).
CUDA_PACKAGES = {"libcudart": "cuda-cudart", "libcublas": "libcublas", "libcublasLt": "libcublas"}


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(0)


def dockerfile_list(text, name):
    """The words of `ARG NAME="..."` (backslash continuations allowed)."""
    m = re.search(rf'^ARG {name}="([^"]*)"', text, re.M)
    if not m:
        sys.exit(f"FAIL: the Dockerfile has no ARG {name}=\"...\"")
    return set(m.group(1).replace("\\\n", " ").split())


def needed_libraries(elf):
    """Resolved paths of the shared libraries `elf` loads; fails on one not found."""
    out = subprocess.run(["ldd", elf], capture_output=True, text=True, check=True).stdout
    missing = [line.strip() for line in out.splitlines() if "not found" in line]
    if missing:
        sys.exit(f"FAIL: {elf} needs libraries that are not found here: {missing}")
    return {m.group(1) for m in re.finditer(r"=> (/\S+)", out)}


def spellings(path):
    """`path` as dpkg may have registered it: Debian 12 registers some libraries under
    /lib and some under /usr/lib (merged /usr makes both the same file)."""
    out = []
    for p in (path, os.path.realpath(path)):
        out += [p, p[4:] if p.startswith("/usr/") else "/usr" + p]
    return out


def packages_of(paths):
    """{path: the Debian package that ships it}, from one `dpkg -S` (each call reads the
    whole database); fails on a library that no package ships."""
    queries = sorted({s for p in paths for s in spellings(p)})
    r = subprocess.run(["dpkg", "-S", *queries], capture_output=True, text=True)
    owner = {}
    for line in r.stdout.splitlines():
        packages, _, file = line.partition(": ")
        owner[file.strip()] = packages.split(",")[0].split(":")[0].strip()
    result = {}
    for p in paths:
        found = [owner[s] for s in spellings(p) if s in owner]
        if not found:
            sys.exit(f"FAIL: no Debian package ships {p} (dpkg -S); the image cannot install it")
        result[p] = found[0]
    return result


def main():
    cmake, build, source = sys.argv[1:4]
    if shutil.which("dpkg") is None:
        skip("dpkg not found: the package check needs Debian")
    dockerfile = open(os.path.join(source, "Dockerfile")).read()
    listed = dockerfile_list(dockerfile, "RUNTIME_PACKAGES")
    listed_cuda = dockerfile_list(dockerfile, "CUDA_RUNTIME_PACKAGES")
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([cmake, "--install", build, "--prefix", tmp], capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: cmake --install failed (build the target baton-installed first):\n"
                     f"{r.stdout}{r.stderr}")
        bindir = os.path.join(tmp, "bin")
        elves = [os.path.join(bindir, f) for f in sorted(os.listdir(bindir))]
        libraries = set()
        for elf in elves:
            libraries |= needed_libraries(elf)
    # libucs loads UCX's transports (ib, rdmacm, cma) from ucx/ beside itself.
    for lib in list(libraries):
        if os.path.basename(lib).startswith("libucs.so"):
            modules = os.path.join(os.path.dirname(os.path.realpath(lib)), "ucx")
            for f in sorted(os.listdir(modules)) if os.path.isdir(modules) else []:
                if re.fullmatch(r"libuct_\w+\.so\.\d+", f):
                    libraries |= needed_libraries(os.path.join(modules, f))

    cuda = {lib for lib in libraries if os.path.realpath(lib).startswith("/usr/local/cuda")}
    needed_cuda = set()
    for lib in sorted(cuda):
        stem = os.path.basename(lib).split(".so")[0]
        if stem not in CUDA_PACKAGES:
            sys.exit(f"FAIL: {lib}: no NVIDIA package known for {stem}; add it to "
                     f"CUDA_PACKAGES here and to CUDA_RUNTIME_PACKAGES in the Dockerfile")
        needed_cuda.add(CUDA_PACKAGES[stem] + "-${CUDA}")
    by_package = {}
    for lib, package in sorted(packages_of(sorted(libraries - cuda)).items()):
        by_package.setdefault(package, []).append(os.path.basename(lib))
    needed = set(by_package)

    status = 0
    for package in sorted(needed - listed):
        print(f"FAIL: RUNTIME_PACKAGES lacks {package} (for {', '.join(by_package[package])})")
        status = 1
    for package in sorted(listed - needed):
        print(f"FAIL: RUNTIME_PACKAGES lists {package}, which no installed binary loads")
        status = 1
    for package in sorted(needed_cuda - listed_cuda):
        print(f"FAIL: CUDA_RUNTIME_PACKAGES lacks {package}")
        status = 1
    if status == 0:
        print(f"{len(libraries)} libraries of {len(elves)} installed files: Debian packages "
              f"{' '.join(sorted(needed))}; CUDA packages {' '.join(sorted(needed_cuda)) or 'none'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
