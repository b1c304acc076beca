"""Builds the native parts: the PEP 523 hook (C), the TENSOR_MATCH fast path and the snapshots of small inputs
a graph writes (C++ against torch).

Everything else is in pyproject.toml. torch must be installed first (pip --no-build-isolation),
since the tensor guard compiles against its headers.
"""

from setuptools import Extension, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    ext_modules=[
        Extension(
            "framejit._C._hook",
            sources=[
                "framejit/_C/hook.c",
                "framejit/_C/thread_slot.c",
                "framejit/_C/tail_call.c",
                "framejit/_C/data_stack.c",
            ],
            extra_compile_args=["-O2", "-Wall", "-Werror=implicit-function-declaration"],
        ),
        CppExtension(
            "framejit._C._tensor_guard",
            sources=["framejit/_C/tensor_guard.cpp", "framejit/_C/guard_program.cpp"],
            extra_compile_args=["-O2"],
        ),
        CppExtension(
            "framejit._C._tensor_state",
            sources=["framejit/_C/tensor_state.cpp"],
            extra_compile_args=["-O2"],
        ),
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
)
