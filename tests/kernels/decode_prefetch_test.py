#!/usr/bin/python3
"""Every decode kernel of the built kernel library (the one-activation-row tiles and
row kernels, whose weights stream from DRAM once a token, and the X16 tiles of several
rows, which prefetch in streamed calls: MatmulArgs::stream) contains a software
prefetch instruction.

The prefetches come from prefetch_part / prefetch_block (matmul_avx2_shared.h). GCC
can take a function whose only effects are prefetches for one without side effects
and delete its calls, so a kernel can compile without a single prefetch and still
give the right results: only its decode speed shows it (Q4_K_X16 / Q6_K_X16 decode
streamed 1.3-1.4x slower that way). This test reads the machine code itself.

Usage: decode_prefetch_test.py LIBPC_KERNELS.a
"""

import re
import subprocess
import sys
import unittest

LIB = None

# Each pattern names one family of decode kernels (demangled names, without the
# namespaces); each must match at least one function, and every function
# it matches must prefetch. (The 32-value X16 one-row tiles, q32x_tile16<.., 1, ..>,
# do not prefetch: they decode faster without.)
DECODE_KERNELS = {
    "Q4_K_X16 / Q5_K_X16 tiles of several rows": r"k45x_tile16<V512(Emu)?, [2-8], (true|false)>\(",
    "Q6_K_X16 tiles of several rows": r"q6kx_tile16<V512(Emu)?, [2-8]>\(",
    "IQ4_XS_X16 tiles of several rows": r"iq4xs_tile16<V512(Emu)?, [2-8]>\(",
    "32-value X16 tiles of several rows": r"q32x_tile16<V512(Emu)?, [2-8], ",
    "Q4_K_X16 / Q5_K_X16 one-row tiles": r"k45x_tile16<V512(Emu)?, 1, (true|false)>\(",
    "Q6_K_X16 one-row tiles": r"q6kx_tile16<V512(Emu)?, 1>\(",
    "IQ4_XS_X16 one-row tiles": r"iq4xs_tile16<V512(Emu)?, 1>\(",
    "Q6_K rows as stored (AVX-512 set)": r"q6k_row16<V512(Emu)?>\(",
    "Q8_0 rows as stored (AVX-512 set)": r"q8_0_rows16<V512(Emu)?>\(",
    "AVX2 Q4_K decode rows": r"KQ4_K<1, \d>::run\(",
    "AVX2 Q5_K decode rows": r"KQ5_K<1, \d>::run\(",
    "AVX2 Q6_K decode rows": r"KQ6_K<1, \d>::run\(",
    "AVX2 IQ4_XS decode rows": r"KIQ4_XS<1, \d>::run\(",
    "AVX2 32-value decode rows (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4)": r"KQ32<Dec\w+>::K<1, \d>::run\(",
}


def functions(lib):
    """{demangled name: its instructions' text} of every function in lib."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", lib], capture_output=True, text=True,
                         check=True).stdout
    funcs, name, body = {}, None, []
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            if name is not None:
                funcs[name] = "\n".join(body)
            name, body = re.sub(r"\(anonymous namespace\)::|pc::kern::|pc::", "", m.group(1)), []
        elif name is not None:
            body.append(line)
    if name is not None:
        funcs[name] = "\n".join(body)
    return funcs


class DecodePrefetch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.funcs = functions(LIB)

    def test_every_decode_kernel_prefetches(self):
        for family, pattern in DECODE_KERNELS.items():
            with self.subTest(family=family):
                matched = [n for n in self.funcs if re.search(pattern, n)]
                self.assertTrue(matched, f"no function of {LIB} matches {pattern!r} ({family}): "
                                "the kernel was renamed or inlined; update this test's patterns")
                missing = [n for n in matched if "prefetch" not in self.funcs[n]]
                self.assertEqual(missing, [], f"{family}: decode kernels without a prefetch instruction")

    def test_the_check_sees_a_kernel_without_prefetch(self):
        # The 32-value types' one-row tiles never prefetch: the check must tell them apart.
        tiles = [n for n in self.funcs if re.search(r"q32x_tile16<V512(Emu)?, 1, ", n)]
        self.assertTrue(tiles)
        self.assertTrue(all("prefetch" not in self.funcs[n] for n in tiles))


if __name__ == "__main__":
    LIB = sys.argv.pop(1)
    unittest.main()
