"""Builds the PEP 523 hook (framejit/_C/hook.c); everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "framejit._C._hook",
            sources=["framejit/_C/hook.c"],
            extra_compile_args=["-O2", "-Wall", "-Werror=implicit-function-declaration"],
        )
    ]
)
