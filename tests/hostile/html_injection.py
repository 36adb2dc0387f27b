# Attack: put HTML and <script> in everything that reaches the report: printed output, an exception
# message, and the name of a file in the traceback (the submission holds "ev<script>il.py").
# Holds because: the report's templates escape everything (jinja2 autoescape).
import importlib.util
import os

print("<script>alert('printed')</script><img src=x onerror=alert(1)>")


def gather(x, dim, index):
    print("<script>alert('from gather')</script>")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ev<script>il.py")
    spec = importlib.util.spec_from_file_location("evil", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.boom()
