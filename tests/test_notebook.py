"""Notebooks (torchgrade/engine/notebooks.py): a .ipynb becomes its module, bad notebooks are said so, messages
name cells, and authors get student notebooks that grade like the stubs and the reference."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from nbformat import v4

from torchgrade import notebook as kernel
from torchgrade.authoring import notebooks as authoring_notebooks
from torchgrade.engine import notebooks as notebook
from torchgrade.cli import main
from torchgrade.engine.config import ConfigError, load_assignment
from torchgrade.engine.notebooks import NotebookError, convert, convert_file, python_lines, relabel

from class_folders import REFERENCE, STUB, notebook_of, solved_notebook
from tiny_course import FULL_MARKS, ROOT, make_course


def lines_of(source: str) -> list[str]:
    return python_lines(source)[0]


# --- a cell as Python ---

def test_ipython_only_lines_become_comments_and_python_stays():
    assert lines_of("%matplotlib inline\n!pip install torch\nimport torch\ntorch.cat?\nx = 1") == [
        "# %matplotlib inline", "# !pip install torch", "import torch", "# torch.cat?", "x = 1"]
    # a name assigned from the shell or a magic stays defined (as None), so a later line using it imports
    assert lines_of("files = !ls\nt = %timeit -o f()\ny = 2") == ["files = None  # files = !ls",
                                                                    "t = None  # t = %timeit -o f()", "y = 2"]


def test_a_magic_inside_a_block_leaves_the_block_valid():
    lines = lines_of("for i in range(3):\n    %time f(i)\nz = 3")
    assert lines == ["for i in range(3):", "    pass  # %time f(i)", "z = 3"]
    compile("\n".join(lines), "cell", "exec")


def test_a_cell_magic_makes_the_whole_cell_comments_unless_its_body_runs_in_the_kernels_namespace():
    assert lines_of("%%bash\nls -l\necho hi") == ["# %%bash", "# ls -l", "# echo hi"]
    assert lines_of("%%timeit\ny = f()") == ["# %%timeit", "# y = f()"]  # it runs in a scope of its own
    assert lines_of("%%time\n!nvidia-smi\nmodel = f()") == ["# %%time", "# !nvidia-smi", "model = f()"]
    assert python_lines("%%capture\nfor i in x:\n    pass")[1] == [2]


def test_a_cell_that_is_python_keeps_lines_that_only_look_like_magics():
    source = 'doc = """\n!not a shell line\n%not a magic\n"""\nratio = 7 % 3'
    assert lines_of(source) == source.splitlines()


def test_the_in_notebook_checks_own_lines_and_get_ipython_calls_are_left_out():
    source = ("import torchgrade.notebook\nfrom torchgrade.notebook import check\n"
              "result = torchgrade.notebook.check(\n    'tensors.view')\nget_ipython().system('ls')\nkeep = 1")
    lines = lines_of(source)
    assert lines[-1] == "keep = 1" and all(line.startswith("#") for line in lines[:-1])
    assert lines_of("%load_ext torchgrade\n%torchgrade check tensors") == ["# %load_ext torchgrade",
                                                                           "# %torchgrade check tensors"]


@pytest.mark.parametrize("source", ["-" * 200000 + "1", "a" + ".b" * 100000 + "()"])
def test_a_cell_too_deep_for_pythons_parser_is_left_to_the_sandbox_to_refuse(source):
    assert lines_of(source) == [source]  # the trusted grader does not stop: the import fails in the sandbox


def test_top_level_work_is_found_and_definitions_are_not():
    _, work = python_lines("import torch\ndef f():\n    for i in range(9): pass\nfor epoch in range(9):\n    pass\ntrain()")
    assert work == [4, 6]


# --- a notebook as a module ---

def test_the_module_is_the_code_cells_in_order_without_skipped_cells_or_outputs():
    node = nbformat.reads(solved_notebook("x = 'last'"), as_version=4)
    node.cells[2].outputs = [v4.new_output("stream", text="OUTPUT-NEVER-GRADED")]
    converted = convert(node, "tensors.ipynb")
    assert "OUTPUT-NEVER-GRADED" not in converted.source and "while True" not in converted.source
    assert converted.source.index("def broadcast_shape") < converted.source.index("x = 'last'")
    compile(converted.source, "tensors.py", "exec")
    line = converted.source.splitlines().index("x = 'last'") + 1
    assert converted.where(line) == "cell 7, line 1"  # cells count from the top, markdown included


def test_a_module_made_from_a_notebook_imports_and_works(tmp_path):
    (tmp_path / "nb.ipynb").write_text(solved_notebook())
    namespace: dict = {}
    exec(compile(convert_file(tmp_path / "nb.ipynb").source, "nb.py", "exec"), namespace)
    assert namespace["broadcast_shape"]((3, 1), (1, 4)) == (3, 4)


@pytest.mark.parametrize("content, words", [
    (b"\x89PNG\r\n", "is not a notebook (its content is not JSON)"),
    (b'{"a": 1}', "is JSON but not a notebook"),
    (json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}).encode(), "notebook format 3"),
    (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}).encode(),
     "is not a valid notebook"),
    (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code",
                                                                                  "source": 7}]}).encode(),
     "is not a valid notebook"),
    (notebook_of("x <- 1", kernelspec={"name": "ir", "display_name": "R", "language": "R"}).encode(),
     "is a notebook for R (R), not Python"),
    (notebook_of("", "  \n"), "holds no code to grade"),
    (notebook_of(("def f(): pass", ["skip-grading"])), "holds no code to grade"),
])
def test_a_bad_notebook_is_said_so_with_what_to_do(tmp_path, content, words):
    path = tmp_path / "tensors.ipynb"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(NotebookError, match="^tensors.ipynb ") as error:
        convert_file(path)
    assert words in str(error.value)


def test_a_notebook_another_tool_wrote_with_fields_of_its_own_is_still_graded(tmp_path):
    data = json.loads(notebook_of("x = 1"))
    data["cells"][1]["vscode_extra"] = {"languageId": "python"}  # not in nbformat's schema
    del data["cells"][1]["outputs"]
    (tmp_path / "tensors.ipynb").write_text(json.dumps(data))
    assert "x = 1" in convert_file(tmp_path / "tensors.ipynb").source


def test_a_notebook_too_big_to_read_says_to_clear_its_outputs(tmp_path, monkeypatch):
    monkeypatch.setattr(notebook, "MAX_NOTEBOOK_BYTES", 1000)
    path = tmp_path / "tensors.ipynb"
    path.write_text(solved_notebook())
    with pytest.raises(NotebookError, match="Clear all outputs"):
        convert_file(path)


def test_a_course_tag_of_its_own_leaves_its_cells_out(tmp_path):
    path = tmp_path / "tensors.ipynb"
    path.write_text(notebook_of(("raise SystemExit", ["not-graded"]), "x = 1"))
    assert "SystemExit" in convert_file(path).source
    assert "SystemExit" not in convert_file(path, skip_tag="not-graded").source


# --- messages name cells ---

def _maps(tmp_path: Path, *cells: str) -> dict:
    path = tmp_path / "tensors.ipynb"
    path.write_text(notebook_of(*cells))
    return {"tensors": convert_file(path)}


def test_tracebacks_forbidden_calls_and_syntax_errors_name_the_cell_and_its_line(tmp_path):
    maps = _maps(tmp_path, "import torch", "def view(x):\n    y = 1\n    return x.reshape(2)")
    line = maps["tensors"].source.splitlines().index("    return x.reshape(2)") + 1
    assert relabel(f'  File "tensors.py", line {line}, in view', maps) == \
        '  File "tensors.ipynb", cell 3, line 3, in view'
    assert relabel(f"calls reshape (tensors.py line {line} (seen while it ran))", maps) == \
        "calls reshape (tensors.ipynb, cell 3, line 3 (seen while it ran))"
    assert relabel(f'  File "/tmp/torchgrade-submission-x/tensors.py", line {line}', maps) == \
        '  File "tensors.ipynb", cell 3, line 3'
    assert relabel("tensors.py could not be imported (SyntaxError)", maps) == \
        "tensors.ipynb could not be imported (SyntaxError)"
    assert relabel("my_tensors.py line 3 and tensors.pyc", maps) == "my_tensors.py line 3 and tensors.pyc"


def test_the_import_hint_speaks_of_the_notebook(tmp_path):
    from torchgrade.engine.hints import HINTS

    assert notebook.IMPORT_ADVICE[0] in HINTS[("*", "import")]["en"]  # the hint's own text: a change there shows here
    maps = _maps(tmp_path, "x = 1")
    assert relabel(f"tensors.py could not be imported\nhint: {notebook.IMPORT_ADVICE[0]}; code runs", maps) == \
        f"tensors.ipynb could not be imported\nhint: {notebook.IMPORT_ADVICE[1]}; code runs"


def test_a_time_limit_hit_at_import_names_the_cells_that_do_work_and_the_way_out(tmp_path):
    maps = _maps(tmp_path, "def f():\n    return 1", "model = f()\nfor epoch in range(10**9):\n    pass")
    text = relabel("called: f()\nimporting tensors.py took longer than 10 s\nhint: look for a loop", maps)
    assert "importing tensors.ipynb took longer than 10 s" in text
    assert "cell 3, line 2: `for epoch in range(10**9):`" in text and "skip-grading" in text
    assert 'if __name__ == "__main__":' in text
    assert text.splitlines()[-1] == "hint: look for a loop"  # the message's own hint stays last


def test_only_a_module_made_from_the_notebook_beside_it_is_relabelled(tmp_path):
    course = load_assignment(make_course(tmp_path / "course"))
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "tensors.ipynb").write_text(solved_notebook())
    assert notebook.prepare(folder, course) == []
    assert set(notebook.cell_maps(folder, course)) == {"tensors"}
    (folder / "tensors.py").write_text((folder / "tensors.py").read_text() + "\nx = 1\n")  # the student's own .py
    assert notebook.cell_maps(folder, course) == {}


# --- the course's settings ---

def test_the_notebooks_key_is_checked(tmp_path):
    path = make_course(tmp_path)
    text = path.read_text()
    path.write_text(text + "notebooks: {file: homework.ipynb, skip_tag: scratch}\n")
    rules = load_assignment(path).notebooks
    assert (rules.file, rules.skip_tag) == ("homework.ipynb", "scratch")
    for bad, words in (("{file: homework.py}", "notebooks.file"), ("{skip_tags: x}", "did you mean 'skip_tag'"),
                       ("{file: ../x.ipynb}", "notebooks.file")):
        path.write_text(text + f"notebooks: {bad}\n")
        with pytest.raises(ConfigError, match="notebooks"):
            load_assignment(path)
        assert words in str(pytest.raises(ConfigError, load_assignment, path).value)


def test_a_course_whose_exercises_live_in_one_notebook_grades_it_for_each(tmp_path):
    from torchgrade.classroom.batch import grade_class
    from torchgrade.classroom.submissions import survey

    path = make_course(tmp_path / "course")
    path.write_text(path.read_text() + "notebooks: {file: homework.ipynb}\n")
    course = load_assignment(path)
    write_to = tmp_path / "class" / "alice" / "homework.ipynb"
    write_to.parent.mkdir(parents=True)
    write_to.write_text(solved_notebook())
    found = survey([tmp_path / "class"], notebook.module_names(course), tmp_path / "out")
    result = grade_class(found.submissions, course, tmp_path / "out", device="cpu")
    assert {g.submission: g.score for g in result.grades} == {"alice": FULL_MARKS}


# --- authoring ---

def test_a_student_notebook_holds_the_module_and_a_check_per_target():
    node = authoring_notebooks.module_notebook(STUB, "tensors", ["broadcast_shape", "one_hot"], "Tensors")
    code = [c.source for c in node.cells if c.cell_type == "code"]
    assert "%torchgrade check tensors.broadcast_shape" in code and "%torchgrade check tensors.one_hot" in code
    assert any(c.cell_type == "markdown" and c.source.startswith("## `one_hot`") for c in node.cells)
    namespace: dict = {}
    exec(compile(convert(node, "tensors.ipynb").source, "tensors.py", "exec"), namespace)
    assert callable(namespace["one_hot"]) and callable(namespace["view"])  # every name of the stub is there
    again = authoring_notebooks.module_notebook(STUB, "tensors", ["broadcast_shape", "one_hot"], "Tensors")
    assert notebook.notebook_text(node) == notebook.notebook_text(again)  # the same bytes each time


def test_stubs_notebook_writes_them_and_its_check_finds_them_stale(tmp_path):
    course = make_course(tmp_path)
    runner = CliRunner()
    done = runner.invoke(main, ["stubs", "--notebook", "--check", "--assignment", str(course)])
    assert done.exit_code == 1 and "out of date" in done.output
    done = runner.invoke(main, ["stubs", "--notebook", "--assignment", str(course)])
    assert done.exit_code == 0 and (tmp_path / "notebooks" / "tensors.ipynb").is_file(), done.output
    assert runner.invoke(main, ["stubs", "--notebook", "--check", "--assignment", str(course)]).exit_code == 0
    (tmp_path / "notebooks" / "tensors.ipynb").write_text(notebook_of("x = 1"))
    assert runner.invoke(main, ["stubs", "--notebook", "--check", "--assignment", str(course)]).exit_code == 1


def test_init_notebook_starts_a_course_whose_notebook_scores_zero_and_whose_reference_scores_full(tmp_path):
    done = CliRunner().invoke(main, ["init", str(tmp_path / "course"), "--notebook"])
    assert done.exit_code == 0, done.output
    assert "torchgrade check --path notebooks" in done.output
    stub = tmp_path / "course" / "notebooks" / "activations.ipynb"
    assert stub.is_file()
    course = load_assignment(tmp_path / "course" / "assignment.yaml")
    authoring_notebooks.generate_notebooks(course, tmp_path / "solved", from_reference=True)
    from torchgrade.engine.grading import grade_submission

    for folder, score in ((stub.parent, 0.0), (tmp_path / "solved", course.max_score)):
        with notebook.graded_folder(folder, course) as (graded, notes):
            assert graded != folder and notes == []
            grade = grade_submission(graded, course, device="cpu", include_hidden=False)
        assert grade.score == score, [t.output for t in grade.tests if t.status != "passed"]
    assert not list(stub.parent.glob("*.py"))  # the student's folder holds what it held


def test_a_notebook_of_more_cells_than_any_exercise_has_is_refused_before_it_is_read_in_full(tmp_path, monkeypatch):
    monkeypatch.setattr(notebook, "MAX_CELLS", 3)
    path = tmp_path / "tensors.ipynb"
    path.write_text(notebook_of("a = 1", "b = 2", "c = 3"))  # and its markdown cell: 4
    with pytest.raises(NotebookError, match="has 4 cells, more than torchgrade reads"):
        convert_file(path)


def test_check_path_says_why_a_notebook_is_not_graded_and_watch_sends_notebooks_to_the_cell(tmp_path):
    course = make_course(tmp_path / "course")
    work = tmp_path / "work"
    work.mkdir()
    (work / "tensors.ipynb").write_text("print('my homework')\n")
    runner = CliRunner()
    done = runner.invoke(main, ["check", "--path", str(work), "--device", "cpu", "--assignment", str(course),
                                "--report", str(tmp_path / "report")])
    assert done.exit_code == 1, done.output
    assert "torchgrade: note: tensors.ipynb is not a notebook (its content is not JSON)" in done.output
    assert "not a notebook" in json.loads((tmp_path / "report" / "results.json").read_text())["output"]
    assert sorted(p.name for p in work.iterdir()) == ["tensors.ipynb"]
    # JSON nested past what json.loads can recurse (tests/hostile/notebooks.py): the same one line, no traceback
    (work / "tensors.ipynb").write_text('{"nbformat": 4, "cells": [], "metadata": {"x": ' + "[" * 50_000 + "]" * 50_000 + "}}")
    done = runner.invoke(main, ["check", "--path", str(work), "--device", "cpu", "--assignment", str(course),
                                "--report", str(tmp_path / "report")])
    assert done.exit_code == 1, done.output
    assert "torchgrade: note: tensors.ipynb is not a notebook torchgrade reads (it is nested more than" in done.output
    assert "Traceback" not in done.output and "RecursionError" not in done.output
    (work / "tensors.ipynb").write_text(solved_notebook())
    done = runner.invoke(main, ["check", "--watch", "--path", str(work), "--assignment", str(course)])
    assert done.exit_code == 2 and "check from a cell" in done.output


# --- the in-notebook check's display and magic ---

def test_the_inline_summary_escapes_what_the_student_controls_and_falls_back_to_text():
    verdicts = kernel.Verdicts(rows=[{"name": "tensors.view: <b>x</b>", "status": "failed", "score": 0, "max_score": 2,
                                        "output": "<script>alert(1)</script>", "extra_data": {"outcome": "failed"}}],
                                 text="✗ tensors.py  0 / 2", status=1, score=0, max_score=2)
    page = verdicts._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;b&gt;x" in page
    assert "0 / 2" in page and "not every check passed" in page
    assert repr(verdicts) == "✗ tensors.py  0 / 2" and not verdicts.passed


def test_the_magic_takes_check_targets_and_options_and_refuses_anything_else(monkeypatch):
    class Shell:
        def register_magic_function(self, function, kind, name):
            self.magic = (function, kind, name)

    calls = []
    monkeypatch.setattr(kernel, "check", lambda *targets, **options: calls.append((targets, options)))
    shell = Shell()
    import torchgrade

    torchgrade.load_ipython_extension(shell)
    function, kind, name = shell.magic
    assert (kind, name) == ("line", "torchgrade")
    function("check tensors.view tensors.one_hot --device cpu --lang zh")
    assert calls == [(("tensors.view", "tensors.one_hot"), {"device": "cpu", "lang": "zh"})]
    with pytest.raises(ValueError, match="usage: %torchgrade check"):
        function("grade everything")


def test_the_check_outside_a_kernel_says_where_it_runs(monkeypatch):
    pytest.importorskip("IPython")
    with pytest.raises(RuntimeError, match="inside Jupyter or Colab"):
        kernel.check("tensors")
