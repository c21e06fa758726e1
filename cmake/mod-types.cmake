# Tensor formats: the type-traits table, block codecs and scalar dot products.
fl_module(types SOURCES engine/tensor-types.c engine/quant-legacy.c engine/quant-k.c engine/quant-nl.c)
# Bit-exactness with ggml needs every float operation rounded on its own:
# a fused multiply-add (allowed by GNU C's default contraction on FMA
# targets) would change dequantized values and quantizer decisions.
target_compile_options(fl_types PRIVATE -ffp-contract=off)

fl_test(test-quant SOURCES tests/test-quant.c MODULES types TIMEOUT 120)
