"""The corpus module is not a test module: have pytest rewrite its asserts all the same, so that
its functions (asserts_and_del) keep the bytecode they had when the corpus was in a test file."""

import pytest

pytest.register_assert_rewrite("tests.codeobj.corpus")
