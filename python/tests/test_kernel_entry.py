"""The kernels' doors of varlen.kernel_entry, on plain torch tensors (every
tensor counts as a device tensor unless it is in `host`)."""

import pytest

torch = pytest.importorskip("torch")

from varlen import kernel_entry as ke  # noqa: E402


def test_c_int_is_pyarg_parse_tuple_i():
    assert ke.c_int(7) == 7 and ke.c_int(True) == 1 and ke.c_int(torch.tensor(5)) == 5
    with pytest.raises(TypeError, match="^'float' object cannot be interpreted as an integer$"):
        ke.c_int(2.0)
    with pytest.raises(TypeError, match="^only integer tensors of a single element"):
        ke.c_int(torch.tensor(2.0))
    with pytest.raises(OverflowError, match="^signed integer is greater than maximum$"):
        ke.c_int(2**31)
    with pytest.raises(OverflowError, match="^signed integer is less than minimum$"):
        ke.c_int(-2**31 - 1)


def launcher(host=()):
    return ke.TritonJit(lambda *args: None, lambda t: not any(t is h for h in host))


def test_triton_launcher_pointers_and_empty_grids():
    cu = torch.tensor([0, 3], dtype=torch.int32)
    kernel = launcher(host=(cu,))
    with pytest.raises(ValueError, match=r"^Pointer argument cannot be accessed from Triton"):
        kernel[(1, 1, 1)](cu)
    empty = torch.tensor([], dtype=torch.int32)
    kernel = launcher(host=(empty,))
    kernel[(0, 2, 1)](empty)  # data_ptr() == 0: a valid null pointer
    assert kernel.launches == 0  # a grid of no blocks launches nothing
    kernel = launcher()
    kernel[(2, 2, 1)](cu, None, 3, 0.5)
    assert kernel.launches == 1
    with pytest.raises(TypeError, match="^'float' object cannot be interpreted as an integer$"):
        kernel[(2, 2, 1.0)](cu)
    with pytest.raises(ke.NotModelled):
        kernel[(1, 1, 1)]([cu])


def test_flash_entry_checks_in_order():
    entry = ke.FlashEntry(lambda t: True)
    q = torch.zeros(4, 2, 12, dtype=torch.float16)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    args = [q, q, q, None, cu, cu, None, None, None, None, 4, 4, 0.0, 0.5, False, False, -1, -1,
            0.0, False, 0, None]
    with pytest.raises(RuntimeError, match="^query, key, value, and out_ must have a head_size "
                                           "that is a multiple of 8$"):
        entry.fa2_varlen_fwd(*args)
    args[0] = args[1] = args[2] = q.float()
    with pytest.raises(RuntimeError, match="^FlashAttention only support fp16 and bf16 data type$"):
        entry.fa2_varlen_fwd(*args)


def test_amx_entry_checks_in_order():
    from varlen import amx_entry

    def run(q, k, v, cu, max_seqlen, on_device=()):
        amx_entry.amx_varlen_entry(q, k, v, cu, cu, max_seqlen, max_seqlen, False,
                                   lambda t: any(t is d for d in on_device))

    q = torch.zeros(9, 2, 64, dtype=torch.bfloat16)
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    run(q, q, q, cu, 5)  # the kernel runs
    with pytest.raises(RuntimeError, match="^qmust be contiguous at last dimension$"):
        run(q[:, :, ::2], q, q, cu, 5)
    with pytest.raises(RuntimeError, match="^k must be a 3D tensor$"):
        run(q, q.unsqueeze(0), q, cu, 5)
    with pytest.raises(RuntimeError, match="^cu_seqlens_q must be contiguous$"):
        run(q, q, q, torch.tensor([0, 0, 4, 0, 9], dtype=torch.int32)[::2], 5)
    with pytest.raises(RuntimeError, match=r"^CHECK_EQ\(cu_seqlens_q.scalar_type\(\), at::kInt\) "
                                           r"failed. Long vs Int$"):
        run(q, q, q, cu.long(), 5)
    odd = torch.zeros(9, 2, 63, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="^invalid head_size 63$"):
        run(odd, odd, odd, cu, 5)
    with pytest.raises(NotImplementedError,
                       match="^\"flash_attn_varlen_func\" not implemented for 'Float'$"):
        run(q.float(), q.float(), q.float(), cu, 5)
    with pytest.raises(RuntimeError, match=r"^Expected seqlen_q <= max_seqlen_q && seqlen_k <= "
                                           r"max_seqlen_k to be true, but got false."):
        run(q, q, q, cu, 4)
    # The offsets are read flat from the storage: a [3, 1] tensor is [0, 4, 9].
    run(q, q, q, cu.reshape(3, 1), 5)
    negative = torch.tensor([0, 9, 4], dtype=torch.int32)  # a length of -5
    for refused in ({"on_device": (q,)}, {"max_seqlen": 5.0},
                    {"cu": negative, "max_seqlen": 9}):
        args = {"q": q, "k": q, "v": q, "cu": cu, "max_seqlen": 5}
        args.update(refused)
        with pytest.raises(amx_entry.NotModelled):
            run(**args)
