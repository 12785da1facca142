"""The thin scripts of training/: each imports its conytrain module and calls an entry point
that module has (a script left pointing at a moved or renamed module fails here)."""

import ast
import glob
import importlib
import os
import unittest

TRAINING = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_WRAPPERS = {"test_model_roundtrip.py"}     # a test program of its own


class Scripts(unittest.TestCase):
    def test_every_script_reaches_its_entry_point(self):
        scripts = sorted(p for p in glob.glob(os.path.join(TRAINING, "*.py"))
                         if os.path.basename(p) not in NOT_WRAPPERS)
        self.assertGreater(len(scripts), 20)
        for path in scripts:
            with self.subTest(script=os.path.basename(path)):
                tree = ast.parse(open(path).read())
                imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
                self.assertEqual(len(imports), 1)
                pkg, name = imports[0].module, imports[0].names[0].name
                self.assertTrue(pkg.startswith("conytrain"), pkg)
                module = importlib.import_module(f"{pkg}.{name}")
                calls = [n.func for n in ast.walk(tree) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Attribute)
                         and isinstance(n.func.value, ast.Name) and n.func.value.id == name]
                self.assertEqual(len(calls), 1)
                self.assertTrue(callable(getattr(module, calls[0].attr, None)), calls[0].attr)


if __name__ == "__main__":
    unittest.main()
