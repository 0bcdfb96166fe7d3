// Registration of a kernel with the emulator (emu.cpp): its name, its
// address, a thunk that calls it with cuLaunchKernel's argument array
// (a pointer to each argument, typed as the kernel declares it), and each
// argument's size (a graph's kernel node copies the values, as a
// driver does from the kernel's parameter layout).

#ifndef DOVETAIL_CUDA_EMU_REGISTER_H
#define DOVETAIL_CUDA_EMU_REGISTER_H

#include <stddef.h>

#include <type_traits>
#include <utility>

extern "C" void emu_register(const char *name, void *fn, void (*thunk)(void *, void **), const size_t *sizes,
                             int nparams);

template <class F> struct EmuThunk;
template <class... A> struct EmuThunk<void (*)(A...)> {
    template <size_t... I> static void go(void *f, void **p, std::index_sequence<I...>) {
        ((void (*)(A...))f)(*(std::remove_cv_t<A> *)p[I]...);
    }
    static void call(void *f, void **p) { go(f, p, std::index_sequence_for<A...>{}); }
    static constexpr size_t sizes[sizeof...(A) + 1] = {sizeof(A)..., 0};
    static constexpr int n = sizeof...(A);
};

#define EMU_KERNEL(name)                                                                                 \
    static const int emu_registered_##name = (emu_register(#name, (void *)&name, &EmuThunk<decltype(&name)>::call, \
                                                 EmuThunk<decltype(&name)>::sizes, EmuThunk<decltype(&name)>::n), \
                                    0);

#endif
