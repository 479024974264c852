"""R CMD check of the built tarball, three ways.

1. With Python found and the whole testthat suite run (NOT_CRAN=true, RETICULATE_PYTHON).
   The tarball is built the way a user gets it (R CMD build, after scripts/setup.sh has shipped
   the Python package into inst/python/dist) and checked with RETICULATE_PYTHON pointing at the
   project's venv. One backend runs here, testthat_results.CHECK_BACKEND (jax), and this is that
   backend's testthat run: tests/testthat.R writes testthat's JUnit XML too, judged as
   test_r_package.py judges the other backends' runs. The vignettes are not rebuilt here
   (--no-build-vignettes / --ignore-vignettes): test_r_package.py renders each of them on every
   backend.

2. and 3. `R CMD check --as-cran`, as CRAN runs it, on the tarball as it is submitted
   (scripts/build_r_tarball.sh: built without a Python, so the vignettes carry the outputs
   recorded in vignettes/precomputed), with no RETICULATE_PYTHON, no NOT_CRAN and HOME an empty
   directory. Nothing may start Python, call uv or write to HOME:
   - offline, no Python: inside a network namespace (`unshare -rn`; where that is refused, with
     http(s)_proxy at a closed port), `python`, `python3` and `uv` on the PATH are stubs that
     record a call and fail. The one NOTE allowed is the one no internet causes: "checking for
     future file timestamps ... NOTE / unable to verify current time" (R asks a time server).
   - CRAN-like: the network as the machine has it, the system's python3 on the PATH and a `uv`
     stub first on it (reticulate would provision Python with the first uv it finds): uv is never
     called, HOME stays empty, "checking for detritus in the temp directory ... OK".
   The two run side by side (R CMD check is single-threaded): about 1.5-2 min together on 2 cores.
   What this machine lacks is skipped with R's documented switches: `--no-manual` (no LaTeX);
   `_R_CHECK_CRAN_INCOMING_REMOTE_=false` (CRAN's package database and the URL checks need the
   network; on a machine with it the first submission adds the "New submission" NOTE); `R_QPDF`
   names a stub where qpdf is missing (--as-cran warns without one; the package has no PDF, so
   the stub is never run, which the test asserts); tidy (HTML validation of the help pages) and
   aspell are skipped by R itself when missing.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import testthat_results

ROOT = Path(__file__).resolve().parents[2]
BACKEND = testthat_results.CHECK_BACKEND


def _env() -> dict:
    env = dict(os.environ)
    # the venv folder may be a link; its bin/python must stay the venv's (not the base Python)
    env["RETICULATE_PYTHON"] = str(Path(os.path.realpath(ROOT / ".venv")) / "bin" / "python")
    env["KERAS_BACKEND"] = BACKEND
    env["NOT_CRAN"] = "true"  # testthat's snapshot tests run only then
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["R_LIBS"] = str(ROOT / ".Rlib")  # keras3 and reticulate, installed by scripts/setup.sh
    return env


def _run(cmd: list, cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _package_source(dest: Path) -> Path:
    """The files R CMD build needs, copied to `dest`: what git tracks or would track (so not the
    multi-GB .venv or the .Rlib, which R CMD build would copy before applying .Rbuildignore),
    plus the shipped Python package in inst/python/dist (made by setup, ignored by git)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    files += [str(p.relative_to(ROOT)) for p in (ROOT / "inst" / "python" / "dist").glob("*")]
    src = dest / "customgrad"
    for name in filter(None, files):
        if name.startswith(("python/", "tests/python/", "bench/", "tools/")) or name == ".venv":
            continue  # Rbuildignored anyway
        if not (ROOT / name).is_file():
            continue  # deleted in the working tree
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    return src


def test_r_cmd_check_runs_every_test_with_python(tmp_path):
    if shutil.which("R") is None:
        pytest.fail("R is not installed; run `make setup` (installs R from Debian)")
    setup = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True,
                           text=True, timeout=900)
    assert setup.returncode == 0, f"scripts/setup.sh failed:\n{setup.stdout}\n{setup.stderr}"

    src = _package_source(tmp_path / "src")
    build = _run(["R", "CMD", "build", "--no-build-vignettes", "--no-manual", str(src)],
                 tmp_path, 300)
    assert build.returncode == 0, f"R CMD build failed:\n{build.stdout}\n{build.stderr}"
    tarballs = list(tmp_path.glob("customgrad_*.tar.gz"))
    assert len(tarballs) == 1, f"R CMD build made {tarballs}"
    listing = subprocess.run(["tar", "tzf", str(tarballs[0])], capture_output=True, text=True)
    assert re.search(r"customgrad/inst/python/dist/customgrad-[^/]+\.whl", listing.stdout), \
        "the tarball does not ship the Python package (inst/python/dist)"

    junit = tmp_path / f"r-{BACKEND}.xml"
    check = subprocess.run(["R", "CMD", "check", "--no-manual", "--ignore-vignettes",
                            tarballs[0].name], cwd=tmp_path, timeout=900, capture_output=True,
                           text=True, env={**_env(), "CUSTOMGRAD_TESTTHAT_JUNIT": str(junit)})
    rcheck = tmp_path / "customgrad.Rcheck"
    log = (rcheck / "00check.log").read_text(errors="replace")
    print(log[-3000:])
    status = re.search(r"^Status: (.*)$", log, re.M)
    assert status, f"no Status line in 00check.log:\n{log[-4000:]}\n{check.stdout[-4000:]}"
    assert "ERROR" not in status.group(1) and "WARNING" not in status.group(1), (
        f"R CMD check: {status.group(1)}\n{log[-6000:]}")
    assert check.returncode == 0, f"R CMD check exited {check.returncode}:\n{check.stdout[-4000:]}"
    notes = re.findall(r"^\* checking (.*) \.\.\. NOTE$", log, re.M)
    print(f"R CMD check on {BACKEND}: {status.group(1)}; NOTEs: {notes}")

    # the testthat suite ran whole: Python was found and nothing was skipped
    rout = (rcheck / "tests" / "testthat.Rout").read_text(errors="replace")
    counts = re.findall(r"\[ FAIL (\d+) \| WARN (\d+) \| SKIP (\d+) \| PASS (\d+) \]", rout)
    assert counts, f"no testthat summary in testthat.Rout:\n{rout[-3000:]}"
    fail, _warn, skip, passed = map(int, counts[-1])
    assert junit.exists(), f"tests/testthat.R wrote no JUnit XML:\n{rout[-3000:]}"
    testthat_results.check(junit, BACKEND)
    assert fail == 0 and skip == 0, f"testthat under R CMD check: {counts[-1]}\n{rout[-5000:]}"
    # ~455 on jax since the copy of keras3's op surface (and its parity tests) went
    assert passed >= 400, f"only {passed} expectations passed under R CMD check"

    # the examples ran against Python: ?customgrad_ops printed op_log1pexp's gradient at 100
    examples = (rcheck / "customgrad-Ex.Rout").read_text(errors="replace")
    assert "> op_grad(op_log1pexp)(100)\nArray(1., dtype=float32)" in examples, \
        "the examples did not reach Python"


# --- `R CMD check --as-cran` as CRAN runs it -------------------------------------------------

CHECK_TIMEOUT = 600  # seconds per check; each takes about 1.5 min on 2 busy cores
STUB = """#!/bin/sh
echo "$(basename "$0") $*" >> {log}
echo "$(basename "$0"): a stub of tests/integration/test_r_check.py; R CMD check must not run it" >&2
exit 1
"""
# the one NOTE that no internet causes (with the CRAN incoming checks kept local)
OFFLINE_NOTE = ("for future file timestamps", "unable to verify current time")


def _stubs(bin_dir: Path, names: list, log: Path) -> None:
    """Executables `names` in `bin_dir` that record each call in `log` and fail."""
    bin_dir.mkdir(parents=True)
    for name in names:
        (bin_dir / name).write_text(STUB.format(log=log))
        (bin_dir / name).chmod(0o755)


def _cran_env(home: Path, bin_dir: Path) -> dict:
    """The environment of a CRAN check machine: nothing inherited from this one (no
    RETICULATE_*, NOT_CRAN, KERAS_*, UV_*, XDG_*), HOME an empty directory, `bin_dir` first on a
    PATH of the system's directories and R's and pandoc's."""
    dirs = [str(bin_dir)]
    for tool in ("R", "pandoc"):
        found = shutil.which(tool)
        if found and os.path.dirname(found) not in dirs:
            dirs.append(os.path.dirname(found))
    dirs += [d for d in ("/usr/bin", "/bin") if d not in dirs]
    env = {"PATH": os.pathsep.join(dirs), "HOME": str(home), "LANG": "C.UTF-8",
           "R_LIBS": str(ROOT / ".Rlib"),  # keras3 and reticulate (scripts/setup.sh)
           "_R_CHECK_CRAN_INCOMING_REMOTE_": "false"}
    if shutil.which("qpdf") is None:
        env["R_QPDF"] = str(bin_dir / "qpdf")  # a stub: the package has no PDF to compact
    if os.environ.get("TMPDIR"):
        env["TMPDIR"] = os.environ["TMPDIR"]
    return env


def _offline(env: dict) -> list:
    """The command prefix that runs a command without network: a network namespace of its own
    where the kernel allows one; else `env` gets proxies at a closed port."""
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-rn"]
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[var] = "http://127.0.0.1:9"
    print("unshare -rn is refused here: offline by proxies at 127.0.0.1:9")
    return []


def _problems(log: str) -> list:
    """(check, level, first detail line) of each NOTE, WARNING and ERROR in a 00check.log."""
    found = re.findall(r"^\* checking (.*?) \.\.\.(?: \[[^\]]*\])? (NOTE|WARNING|ERROR)\n(.*)",
                       log, re.M)
    # a check whose OK line was already written reports on the next line (--as-cran's qpdf one)
    found += [("(see below)", level, detail)
              for level, detail in re.findall(r"^ (NOTE|WARNING|ERROR)\n(.*)", log, re.M)]
    return found


@pytest.fixture(scope="module")
def cran_checks(tmp_path_factory):
    """Builds the tarball as it is submitted (scripts/build_r_tarball.sh) and runs the two
    `--as-cran` set-ups on it side by side. For each: its 00check.log, the R CMD check output,
    its HOME, the calls its stubs recorded and its wall time."""
    if shutil.which("R") is None:
        pytest.fail("R is not installed; run `make setup` (installs R from Debian)")
    if not (ROOT / ".Rlib" / "keras3").exists():
        pytest.fail("keras3 is not in .Rlib; run `make setup`")
    root = tmp_path_factory.mktemp("cran")
    start = time.perf_counter()
    build = subprocess.run(["bash", "scripts/build_r_tarball.sh", str(root)], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, f"build_r_tarball.sh failed:\n{build.stdout}\n{build.stderr}"
    tarballs = list(root.glob("customgrad_*.tar.gz"))
    assert len(tarballs) == 1, f"build_r_tarball.sh made {tarballs}"
    print(f"R CMD build (no Python): {time.perf_counter() - start:.0f} s")

    setups = {"offline": ["python", "python3", "uv"], "cran-like": ["uv"]}
    running = {}
    for name, stubbed in setups.items():
        work = root / name
        home, bin_dir, calls = work / "home", work / "bin", work / "stub-calls.log"
        home.mkdir(parents=True)
        _stubs(bin_dir, stubbed + ["qpdf"], calls)
        env = _cran_env(home, bin_dir)
        prefix = _offline(env) if name == "offline" else []
        out = open(work / "check.out", "w")
        proc = subprocess.Popen(prefix + ["R", "CMD", "check", "--as-cran", "--no-manual",
                                          str(tarballs[0])],
                                cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
        running[name] = (proc, out, work, home, calls, time.perf_counter())
    results = {}
    for name, (proc, out, work, home, calls, began) in running.items():
        try:
            proc.wait(timeout=CHECK_TIMEOUT)
        finally:
            out.close()
            if proc.poll() is None:
                proc.kill()
        log_path = work / "customgrad.Rcheck" / "00check.log"
        results[name] = {
            "returncode": proc.returncode,
            "log": log_path.read_text(errors="replace") if log_path.exists() else "",
            "output": (work / "check.out").read_text(errors="replace"),
            "rcheck": work / "customgrad.Rcheck",
            "home": sorted(str(p.relative_to(home)) for p in home.rglob("*")),
            "calls": calls.read_text() if calls.exists() else "",
            "seconds": time.perf_counter() - began,
        }
    results["tarball"] = tarballs[0]
    return results


def _assert_nothing_started_python(result: dict, name: str) -> None:
    """No stub ran, nothing was written to HOME, no detritus; the tests ran, skipping only what
    needs Python; the examples did not reach Python."""
    log = result["log"]
    status = re.search(r"^Status: .*$", log, re.M)
    print(f"{name}: {status.group(0) if status else 'no Status line'} in {result['seconds']:.0f} s")
    assert result["calls"] == "", f"{name}: R CMD check ran a stub:\n{result['calls']}"
    assert result["home"] == [], f"{name}: R CMD check wrote to HOME: {result['home'][:20]}"
    assert "* checking for detritus in the temp directory ... OK" in log, log[-3000:]
    assert re.search(r"^\* checking re-building of vignette outputs \.\.\.(?: \[[^\]]*\])? OK$",
                     log, re.M), f"{name}: the vignettes were not rebuilt:\n{log[-3000:]}"
    rout = (result["rcheck"] / "tests" / "testthat.Rout").read_text(errors="replace")
    counts = re.findall(r"\[ FAIL (\d+) \| WARN (\d+) \| SKIP (\d+) \| PASS (\d+) \]", rout)
    assert counts, f"{name}: no testthat summary:\n{rout[-3000:]}"
    fail, warn, skip, passed = map(int, counts[-1])
    # the tests of plain R code ran; those that need Python skipped
    assert fail == 0 and warn == 0 and passed >= 50 and skip >= 50, (
        f"{name}: testthat gave {counts[-1]}")
    reasons = re.findall(r"^• (.*) \(\d+\)$", rout, re.M)
    assert set(reasons) <= {"On CRAN",
                            'Python is not started here: NOT_CRAN is not "true" and '
                            "RETICULATE_PYTHON is unset"}, f"{name}: skipped for {reasons}"
    examples = (result["rcheck"] / "customgrad-Ex.Rout").read_text(errors="replace")
    assert "> plan$packages" in examples, "install_customgrad()'s example (no Python) did not run"
    assert "Array(" not in examples and "tf.Tensor" not in examples, \
        f"{name}: an example reached Python"


def test_cran_tarball_ships_precomputed_vignettes_and_no_python_build_files(cran_checks):
    with tarfile.open(cran_checks["tarball"]) as tar:
        names = tar.getnames()
        html = tar.extractfile("customgrad/inst/doc/getting-started.html").read().decode()
    assert "customgrad/build/vignette.rds" in names
    assert "customgrad/vignettes/precomputed/getting-started.md" in names
    assert any(n.startswith("customgrad/inst/python/dist/customgrad-") for n in names)
    shipped = [n for n in names if re.match(
        r"customgrad/(python|dist|build/lib|\.ruff_cache|tests/(differential|clients|python|"
        r"integration)|scripts|docs)(/|$)|customgrad/(RELEASING|README|CHANGELOG)\.md$", n)]
    assert not shipped, f"the tarball ships files R does not need: {shipped[:10]}"
    # built with no Python, the vignette still has its outputs and the plot
    text = re.sub(r"<[^>]+>", "", html)  # the code blocks' text, without the highlighting
    assert "as.numeric(g)\n#&gt; [1] 1\n" in text, "the vignette's outputs are missing"
    assert html.count("data:image/png;base64,") >= 1, "the vignette's plot is missing"


def test_as_cran_offline_without_python(cran_checks):
    result = cran_checks["offline"]
    log = result["log"]
    assert log, f"no 00check.log:\n{result['output'][-4000:]}"
    problems = _problems(log)
    assert [(check, detail) for check, level, detail in problems] == [OFFLINE_NOTE], (
        f"offline --as-cran: expected only the NOTE no internet causes {OFFLINE_NOTE}, got "
        f"{problems}\n{log[-5000:]}")
    assert re.search(r"^Status: 1 NOTE$", log, re.M), log[-3000:]
    _assert_nothing_started_python(result, "offline")


def test_as_cran_cran_like_never_calls_uv_nor_writes_home(cran_checks):
    result = cran_checks["cran-like"]
    log = result["log"]
    assert log, f"no 00check.log:\n{result['output'][-4000:]}"
    # this machine may have no internet: then, and only then, the time server's NOTE
    problems = [(check, detail) for check, level, detail in _problems(log)]
    assert problems in ([], [OFFLINE_NOTE]), f"CRAN-like --as-cran: {problems}\n{log[-5000:]}"
    assert re.search(r"^Status: (OK|1 NOTE)$", log, re.M), log[-3000:]
    _assert_nothing_started_python(result, "cran-like")


def test_cran_like_stubs_catch_a_python_start(tmp_path):
    """The control for the two set-ups above: where the user opts in (NOT_CRAN=true), asking
    whether Python is available makes reticulate look for uv (the stub records `uv --version`)
    and write under HOME; so a check that started Python could not pass them. Offline, so that
    reticulate's own download of uv fails at once."""
    home, bin_dir, calls = tmp_path / "home", tmp_path / "bin", tmp_path / "stub-calls.log"
    home.mkdir()
    _stubs(bin_dir, ["uv"], calls)
    env = dict(_cran_env(home, bin_dir), NOT_CRAN="true")
    proc = subprocess.run(_offline(env) + ["Rscript", "-e", "cat('available:', "
                                           "customgrad:::python_available(), '\\n')"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "available: FALSE" in proc.stdout, proc.stdout + proc.stderr
    assert calls.exists() and "uv " in calls.read_text(), proc.stdout + proc.stderr
    assert any(home.iterdir()), "reticulate wrote nothing to HOME: the HOME check would not see it"


# --- what the CRAN build relies on, cheaply ---------------------------------------------------

NO_PYTHON = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "R_LIBS": str(ROOT / ".Rlib")}


def test_precomputed_vignettes_are_current():
    """Each vignette's pre-computed body was made from its .Rmd as it is now (else R CMD build
    without a Python stops): run scripts/precompute_vignettes.R after changing one."""
    rmds = sorted((ROOT / "vignettes").glob("*.Rmd"))
    assert rmds
    for rmd in rmds:
        body = ROOT / "vignettes" / "precomputed" / f"{rmd.stem}.md"
        assert body.exists(), f"{body.relative_to(ROOT)} is missing: run scripts/precompute_vignettes.R"
        stamp = body.read_text().splitlines()[0]
        md5 = hashlib.md5(rmd.read_bytes()).hexdigest()
        assert f"(md5 {md5})" in stamp, (
            f"{body.relative_to(ROOT)} is stale ({stamp}); {rmd.name} has md5 {md5}: run "
            "scripts/precompute_vignettes.R")
        for figure in re.findall(r'src="(precomputed/[^"]+)"', body.read_text()):
            assert (ROOT / "vignettes" / figure).exists(), f"{body.name} shows a missing {figure}"


def test_vignette_without_python_stops_on_stale_or_missing_outputs(tmp_path):
    if shutil.which("Rscript") is None:
        pytest.fail("Rscript is not installed; run `make setup`")
    shutil.copy(ROOT / "vignettes" / "checking-gradients.Rmd", tmp_path)
    shutil.copytree(ROOT / "vignettes" / "precomputed", tmp_path / "precomputed")
    script = tmp_path / "render.R"
    script.write_text(r"""
render <- function() tryCatch({
  rmarkdown::render("checking-gradients.Rmd", quiet = TRUE, envir = new.env())
  "rendered"
}, error = function(e) paste(class(e)[[1]], conditionMessage(e)))
cat("fresh:", render(), "\n")
cat("\nOne more line.\n", file = "checking-gradients.Rmd", append = TRUE)
cat("stale:", render(), "\n")
unlink("precomputed/checking-gradients.md")
cat("missing:", render(), "\n")
""")
    proc = subprocess.run(["Rscript", "--vanilla", str(script)], cwd=tmp_path,
                          env=dict(NO_PYTHON, HOME=str(tmp_path)), capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "fresh: rendered" in out, out[-4000:]
    assert re.search(r"stale: customgrad_error_vignette .*are\s+stale", out, re.S), out[-4000:]
    assert re.search(r"missing: customgrad_error_vignette .*does not\s+exist", out, re.S), out[-4000:]


def _release_copy(dest: Path, authors: str | None = None, news_heading: str | None = None) -> Path:
    """What scripts/release_check.R reads (DESCRIPTION, NEWS.md, vignettes), copied to `dest`,
    with Authors@R and NEWS.md's first heading replaced where given."""
    (dest / "vignettes").mkdir(parents=True)
    for rmd in (ROOT / "vignettes").glob("*.Rmd"):
        shutil.copy(rmd, dest / "vignettes")
    shutil.copytree(ROOT / "vignettes" / "precomputed", dest / "vignettes" / "precomputed")
    desc = (ROOT / "DESCRIPTION").read_text()
    if authors:
        desc = re.sub(r"^Authors@R:.*?(?=^\S)", f"Authors@R: {authors}\n", desc, flags=re.M | re.S)
    (dest / "DESCRIPTION").write_text(desc)
    news = (ROOT / "NEWS.md").read_text()
    if news_heading:
        news = re.sub(r"^# .*$", news_heading, news, count=1, flags=re.M)
    (dest / "NEWS.md").write_text(news)
    return dest


def test_release_check_refuses_the_placeholder_maintainer(tmp_path):
    """The placeholder maintainer at example.org stays in DESCRIPTION until a person fills it in
    (RELEASING.md); the release check fails until then, and passes once they have."""
    if shutil.which("Rscript") is None:
        pytest.fail("Rscript is not installed; run `make setup`")
    version = re.search(r"^Version: (.*)$", (ROOT / "DESCRIPTION").read_text(), re.M).group(1)

    def release_check(root: Path) -> subprocess.CompletedProcess:
        return subprocess.run(["Rscript", str(ROOT / "scripts" / "release_check.R"), str(root)],
                              env=dict(NO_PYTHON, HOME=str(tmp_path)), capture_output=True,
                              text=True, timeout=120)

    placeholder = release_check(_release_copy(tmp_path / "as-is",
                                              news_heading=f"# customgrad {version}"))
    out = placeholder.stdout + placeholder.stderr
    assert placeholder.returncode == 1, out
    assert "the maintainer is the placeholder customgrad authors <customgrad@example.org>" in out
    assert "NEWS.md" not in out and "vignettes/" not in out, out

    person = 'person("Given", "Family", role = c("aut", "cre"), email = "given.family@r-pkg.net")'
    filled = release_check(_release_copy(tmp_path / "filled", authors=person,
                                         news_heading=f"# customgrad {version}"))
    assert filled.returncode == 0, filled.stdout + filled.stderr
    assert f"customgrad {version} is ready for CRAN" in filled.stdout

    unreleased = release_check(_release_copy(tmp_path / "unreleased", authors=person,
                                             news_heading=f"# customgrad {version} (unreleased)"))
    assert unreleased.returncode == 1 and "NEWS.md: the first heading" in unreleased.stdout
