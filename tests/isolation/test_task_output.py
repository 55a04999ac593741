"""What a Function prints is kept within a bound on disk, and its last lines are still what a
crashed row shows (issue 20: 5 MB printed per forward call grew a task log to 195 MB)."""

from __future__ import annotations

# Each prints 5 MB on each of its first forward calls, then measures every file gradsmith keeps
# in the temporary folder (TMPDIR is the test's own). Loud passes; LoudThenDies then prints
# three last lines and ends its process.
LOUD = """
FILLER = ("x" * 99 + "\\n") * 50_000  # 5 MB

def print_5mb_and_measure():
    sys.stdout.write(FILLER)
    sys.stdout.flush()
    total = 0
    for folder, _, files in os.walk(os.environ["TMPDIR"]):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    with open(os.environ["GRADSMITH_TEST_PIDS"] + ".sizes", "a") as handle:
        handle.write(f"{total}\\n")


@gradsmith.example(_x)
class Loud(Function):
    calls = 0

    @staticmethod
    def forward(ctx, x):
        Loud.calls += 1
        if Loud.calls <= 4:
            print_5mb_and_measure()
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


@gradsmith.example(_x)
class LoudThenDies(Function):
    @staticmethod
    def forward(ctx, x):
        print_5mb_and_measure()
        print_5mb_and_measure()
        print("last words 1\\nlast words 2\\nlast words 3", flush=True)
        os._exit(3)

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_printed_output_is_bounded_on_disk_and_its_end_is_shown(runner, write, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    runner.env["TMPDIR"] = str(temp)
    write("loud.py", LOUD)
    code, doc, err = runner.check("loud.py", "--no-compat", "--jobs", "1", "--timeout", "120")
    rows = {r["name"].split("::")[1]: r for r in doc["results"]}
    assert rows["Loud"]["verdict"] == "pass", rows["Loud"]["reason"]
    dies = rows["LoudThenDies"]
    assert dies["error"] == "crash" and "exit code 3" in dies["reason"], dies["reason"]
    # the last lines printed are the ones shown, in order
    shown = dies["reason"].split("its last output:\n", 1)[1].splitlines()
    assert shown[-3:] == ["last words 1", "last words 2", "last words 3"]
    assert shown[0] == "x" * 99
    sizes = [int(n) for n in (runner.cwd / "pids.txt.sizes").read_text().split()]
    assert len(sizes) == 6  # 30 MB printed in all
    assert max(sizes) < 2_000_000, f"gradsmith kept up to {max(sizes)} bytes of output"
    assert code == 1
