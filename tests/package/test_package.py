"""What the Debian packages hold, checked fast on this build: `meson install
--destdir` (what debian/rules' dh_auto_install runs), then the installed tree
against debian/*.install (every file in exactly one package, every line
matching), the units, the man pages, one version everywhere, and the installed
programs and Python package working from the installed tree. With
DGLD_PACKAGE_DIR naming a scripts/package.sh output of this version, the .deb
files' contents are compared with the same list. docs/operations.md, "Installing".
"""
import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DGLD_BUILD_ROOT", REPO / "build"))
DEBIAN = REPO / "debian"
PROGRAMS = ["graph-server", "sampler-worker", "trainer-host", "dgl-launch", "dgld-stats", "dgl-partition"]
DEB_PREFIX = "/usr"  # debian/rules: debhelper's meson configures --prefix=/usr


def run(argv, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, argv))} exited {r.returncode}:\n{r.stdout[-3000:]}"
    return r.stdout


def introspect(what):
    return json.loads(run(["meson", "introspect", str(BUILD), what]))


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    dest = tmp_path_factory.mktemp("destdir")
    run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest), "--no-rebuild", "--quiet"])
    opts = {o["name"]: o["value"] for o in introspect("--buildoptions")}
    prefix = opts["prefix"]
    unitdir = opts["systemdunitdir"] or f"{prefix}/lib/systemd/system"
    files = sorted("/" + str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() or p.is_symlink())
    return {"dest": dest, "prefix": prefix, "bindir": f"{prefix}/{opts['bindir']}", "unitdir": unitdir,
            "datadir": f"{prefix}/{opts['datadir']}", "mandir": f"{prefix}/{opts['mandir']}", "files": files,
            "version": introspect("--projectinfo")["version"]}


def at(inst, path):
    return inst["dest"] / path.lstrip("/")


def as_debian(inst, path):
    """An installed path as the Debian build lays it out (prefix /usr, units in /lib/systemd/system)."""
    if path.startswith(inst["unitdir"] + "/"):
        return "/lib/systemd/system" + path[len(inst["unitdir"]):]
    assert path.startswith(inst["prefix"] + "/"), f"{path} is installed outside the prefix {inst['prefix']}"
    return DEB_PREFIX + path[len(inst["prefix"]):]


def install_lines():
    """(package, pattern) of every debian/<package>.install line."""
    out = []
    for f in sorted(DEBIAN.glob("*.install")):
        for line in f.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                out.append((f.name.removesuffix(".install"), "/" + line.split()[0].strip("/")))
    return out


def covers(pattern, path):
    return path == pattern or path.startswith(pattern + "/") or fnmatch.fnmatch(path, pattern)


def test_every_installed_file_is_in_exactly_one_package(inst):
    lines = install_lines()
    control = (DEBIAN / "control").read_text()
    packages = re.findall(r"^Package: (\S+)", control, re.M)
    assert sorted(packages) == sorted({p for p, _ in lines}), "debian/control's packages differ from debian/*.install"
    used = set()
    for path in inst["files"]:
        deb = as_debian(inst, path)
        owners = [(p, pat) for p, pat in lines if covers(pat, deb)]
        assert len(owners) == 1, f"{deb} (installed as {path}) is in {len(owners)} package(s): {owners}"
        used.add(owners[0])
    unused = [x for x in lines if x not in used]
    assert not unused, f"debian/*.install lines matching no installed file: {unused}"
    rules = (DEBIAN / "rules").read_text()
    assert "-Dsystemdunitdir=/lib/systemd/system" in rules and "-Dtests=false" in rules
    # The user comes from the installed sysusers file (dh_installsysusers of debhelper 13.11 does not see it);
    # purge removes it again.
    sysusers = [f for f in inst["files"] if "/sysusers.d/" in f]
    assert [Path(f).name for f in sysusers] == ["dgld.conf"], sysusers
    assert "systemd-sysusers ${DPKG_ROOT:+--root=\"$DPKG_ROOT\"} dgld.conf" in (DEBIAN / "dgld.postinst").read_text()
    assert "systemd-sysusers" in control
    postrm = (DEBIAN / "dgld.postrm").read_text()
    assert all(x in postrm for x in ("userdel dgld", "rm -rf /etc/dgld /var/lib/dgld", "/dev/shm")), postrm


def test_programs_models_units_and_python_are_installed(inst):
    for p in PROGRAMS:
        assert os.access(at(inst, f"{inst['bindir']}/{p}"), os.X_OK), f"{p} is not installed in {inst['bindir']}"
    models = sorted(p.name for p in at(inst, f"{inst['datadir']}/dgld/models").glob("*.pt"))
    assert models == sorted(f"{k}-{n}.pt" for k in ("gat", "gcn", "rgcn", "sage") for n in range(1, 5))
    unit = at(inst, f"{inst['unitdir']}/dgld-graph-server@.service").read_text()
    assert f"ExecStart={inst['bindir']}/graph-server $DGLD_GRAPH_SERVER_ARGS" in unit
    assert "@bindir@" not in unit
    assert at(inst, f"{inst['unitdir']}/dgld.target").is_file()
    assert "u dgld " in at(inst, f"{inst['prefix']}/lib/sysusers.d/dgld.conf").read_text()
    assert "d /etc/dgld " in at(inst, f"{inst['prefix']}/lib/tmpfiles.d/dgld.conf").read_text()
    pkg = [f for f in inst["files"] if "/dist-packages/dgld/" in f]
    assert any(re.search(r"/dgld/_C\.cpython-.*\.so$", f) for f in pkg), "the extension dgld._C is not installed"
    assert not any("_test_hooks" in f for f in pkg), "the tests' hooks module must not be installed"


def python_path(inst):
    pkgs = {f[:f.index("/dist-packages/") + len("/dist-packages")] for f in inst["files"] if "/dist-packages/" in f}
    assert len(pkgs) == 1, f"the Python package is installed in {pkgs}"
    return str(at(inst, pkgs.pop()))


def test_one_version_everywhere(inst):
    """meson.build's version: every program's --version, dgld.__version__, the protocol's, the man pages'."""
    seen = {}
    for p in PROGRAMS:
        out = run([at(inst, f"{inst['bindir']}/{p}"), "--version"]).strip()
        m = re.fullmatch(rf"{re.escape(p)} (\S+) \(protocol (\d+)\)", out)
        assert m, f"{p} --version printed '{out}', expected '{p} <version> (protocol <n>)'"
        seen[p] = (m.group(1), int(m.group(2)))
    assert {v for v, _ in seen.values()} == {inst["version"]}, seen
    protocol = seen["graph-server"][1]
    assert {n for _, n in seen.values()} == {protocol}, seen
    env = dict(os.environ, PYTHONPATH=python_path(inst), OMP_NUM_THREADS="1")
    out = run([sys.executable, "-c", "import dgld; print(dgld.__version__, dgld.protocol_version, dgld.__file__)"],
              env=env, cwd="/").split()
    assert out[:2] == [inst["version"], str(protocol)], out
    assert out[2].startswith(str(inst["dest"])), f"dgld was imported from {out[2]}, not the installed tree"


def test_man_pages_match_help(inst):
    man = at(inst, f"{inst['mandir']}/man1")
    if not man.is_dir():
        pytest.skip("no man pages: help2man is not installed (-Dman=auto); the Debian build enables them")
    for p in PROGRAMS:
        page = (man / f"{p}.1").read_text()
        assert re.search(rf'^\.TH {re.escape(p.upper())} "1" "[^"]*" "{re.escape(p)} {re.escape(inst["version"])}',
                         page, re.M), f"{p}.1 has no .TH line naming version {inst['version']}"
        helptext = run([at(inst, f"{inst['bindir']}/{p}"), "--help"])
        flags = set(re.findall(r"^\s+(--[a-z0-9-]+)", helptext, re.M))
        assert flags, f"{p} --help lists no options"
        text = page.replace("\\-", "-")
        missing = sorted(f for f in flags if f not in text)
        assert not missing, f"{p}.1 lacks options its --help lists: {missing}"


def test_installed_programs_train_from_the_installed_tree(inst, tmp_path):
    """dgl-partition and trainer-host as installed: the built-in model comes from <datadir>/dgld/models."""
    bindir = at(inst, inst["bindir"])
    run([bindir / "dgl-partition", "--generate", "sbm:nodes=2000,avg_degree=8,classes=4,feat_dim=16",
         "--num-parts", "1", "--graph-name", "g", "--output", tmp_path / "parts"], cwd=tmp_path)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = run([bindir / "trainer-host", "--standalone", "--part-config", tmp_path / "parts/g.json",
               "--num-epochs", "1", "--model", "sage"], cwd=tmp_path, env=env)
    assert "epoch" in out.lower(), out[-2000:]


def test_built_debs_hold_the_same_files(inst):
    d = os.environ.get("DGLD_PACKAGE_DIR")
    if not d:
        pytest.skip("DGLD_PACKAGE_DIR is not set (a scripts/package.sh output directory to compare)")
    expected = {as_debian(inst, f) for f in inst["files"]}
    got = set()
    for pkg in ("dgld", "python3-dgld"):
        debs = sorted(Path(d).glob(f"{pkg}_{inst['version']}_*.deb"))
        assert debs, f"no {pkg}_{inst['version']}_*.deb in {d}"
        listing = run(["dpkg-deb", "-c", debs[0]])
        for line in listing.splitlines():
            f = line.split()[5].removeprefix(".")
            if not line.startswith("d") and not f.startswith("/usr/share/doc/"):
                got.add(f.removesuffix(".gz") if f.startswith("/usr/share/man/") else f)  # dh_compress
        depends = run(["dpkg-deb", "-f", debs[0], "Depends"])
        assert "libc6" in depends, f"{pkg}'s Depends has no shlibs: {depends}"
    # Nothing but the install tree (and /usr/share/doc): dh_python3 compiles bytecode at install time.
    assert got == expected, f"only in the .deb: {sorted(got - expected)[:10]}; only installed: {sorted(expected - got)[:10]}"
