dnl RAILNET_CHECK_CUDA: CUDA headers and nvcc. Default /usr/local/cuda when it
dnl exists. The plugin only needs cuda.h (libcuda is dlopen'ed at run time);
dnl nvcc builds the GPU-initiated path and the GPU tests.
AC_DEFUN([RAILNET_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit (default: /usr/local/cuda when present)])],
    [], [with_cuda=check])
  have_cuda=no
  CUDA_HOME=
  AS_CASE([$with_cuda],
    [no], [],
    [check|yes], [AS_IF([test -f /usr/local/cuda/include/cuda.h], [CUDA_HOME=/usr/local/cuda])],
    [CUDA_HOME=$with_cuda])
  AS_IF([test -n "$CUDA_HOME"], [
    AS_IF([test -f "$CUDA_HOME/include/cuda.h"], [have_cuda=yes],
          [AC_MSG_ERROR([--with-cuda=$CUDA_HOME: $CUDA_HOME/include/cuda.h not found])])
  ])
  AS_IF([test "x$with_cuda" = xyes && test "x$have_cuda" = xno],
    [AC_MSG_ERROR([--with-cuda given but no CUDA toolkit found in /usr/local/cuda])])
  NVCC=
  AS_IF([test "x$have_cuda" = xyes], [
    AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
    AC_DEFINE([HAVE_CUDA], [1], [CUDA headers available])
    CUDA_CPPFLAGS="-isystem $CUDA_HOME/include"
    CUDA_LDFLAGS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64"
  ])
  dnl How installed programs (railnet-write-bw --gpu-initiated) link the CUDA
  dnl runtime: shared (default; found through an rpath to the toolkit) or
  dnl static (no rpath, no libcudart.so at run time: what distribution
  dnl packages need, as the toolkit is not a package they can depend on).
  AC_ARG_WITH([cudart],
    [AS_HELP_STRING([--with-cudart=shared|static], [link the CUDA runtime into installed programs shared (default, with an rpath to the toolkit) or static (no rpath; used by the Debian packages)])],
    [], [with_cudart=shared])
  AS_CASE([$with_cudart],
    [shared], [CUDART_LIBS=-lcudart],
    [static], [CUDART_LIBS="-lcudart_static -lrt"
               AS_IF([test "x$have_cuda" = xyes], [CUDA_LDFLAGS="-L$CUDA_HOME/lib64"])],
    [AC_MSG_ERROR([--with-cudart=$with_cudart: shared or static])])
  AC_SUBST([CUDART_LIBS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
  AM_CONDITIONAL([HAVE_NVCC], [test -n "$NVCC"])
  AC_SUBST([CUDA_HOME])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([NVCC])
  AS_IF([test "x$have_cuda" = xyes],
    [railnet_cuda_summary="yes ($CUDA_HOME, nvcc: ${NVCC:-none}, cudart $with_cudart)"
     railnet_cuda_builds=", CUDA memory support, plugin/gdaki device code, GPU tests (run with make check-gpu)"],
    [railnet_cuda_summary="no (CUDA parts left out: no GPU memory registration, no plugin/gdaki device code, no GPU tests)"
     railnet_cuda_builds=""])
])

dnl RAILNET_CHECK_NCCL: nccl.h and libnccl for the GPU end-to-end tests only.
dnl Looked for, in order: --with-nccl=DIR (DIR/include, DIR/lib64 or DIR/lib),
dnl the CUDA toolkit dir, then where distributions put it (libnccl-dev:
dnl /usr/include/nccl.h and libnccl.so in the multiarch libdir, which the
dnl compiler and linker search already, so no flags are added for it).
dnl Sets NCCL_HOME (the prefix, /usr for the distribution's), NCCL_CPPFLAGS
dnl and NCCL_LDFLAGS.
AC_DEFUN([RAILNET_CHECK_NCCL], [
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl=DIR], [NCCL for the GPU tests (default: the CUDA toolkit dir, then the system's, e.g. libnccl-dev)])],
    [], [with_nccl=check])
  NCCL_HOME=
  NCCL_CPPFLAGS=
  NCCL_LDFLAGS=
  dnl railnet_nccl_prefix DIR: NCCL in DIR/include and DIR/lib64 or DIR/lib
  railnet_nccl_prefix() {
    NCCL_HOME=$[1]
    NCCL_CPPFLAGS="-isystem $[1]/include"
    for d in "$[1]/lib64" "$[1]/lib"; do
      AS_IF([test -z "$NCCL_LDFLAGS" && ls "$d"/libnccl.so* >/dev/null 2>&1],
            [NCCL_LDFLAGS="-L$d -Wl,-rpath,$d"])
    done
  }
  AS_CASE([$with_nccl],
    [no], [],
    [check|yes], [
      AS_IF([test "x$have_cuda" = xyes && test -f "$CUDA_HOME/include/nccl.h"],
        [railnet_nccl_prefix "$CUDA_HOME"],
        [test "x$have_cuda" = xyes], [
          dnl The distribution's NCCL: found by the compiler's and linker's own
          dnl search paths (nccl.h includes cuda_runtime.h, hence CUDA's flags).
          railnet_save_CPPFLAGS=$CPPFLAGS
          railnet_save_LDFLAGS=$LDFLAGS
          CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
          LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
          AC_CHECK_HEADER([nccl.h],
            [AC_CHECK_LIB([nccl], [ncclGetVersion], [NCCL_HOME=/usr])])
          CPPFLAGS=$railnet_save_CPPFLAGS
          LDFLAGS=$railnet_save_LDFLAGS
        ])
      AS_IF([test "x$with_nccl" = xyes && test -z "$NCCL_HOME"],
        [AC_MSG_ERROR([--with-nccl given but no NCCL found (CUDA: $have_cuda; looked in ${CUDA_HOME:-no CUDA dir} and the system paths)])])
    ],
    [AS_IF([test -f "$with_nccl/include/nccl.h"], [railnet_nccl_prefix "$with_nccl"],
           [AC_MSG_ERROR([--with-nccl=$with_nccl: $with_nccl/include/nccl.h not found])])])
  AM_CONDITIONAL([HAVE_NCCL], [test -n "$NCCL_HOME" && test "x$have_cuda" = xyes])
  AC_SUBST([NCCL_HOME])
  AC_SUBST([NCCL_CPPFLAGS])
  AC_SUBST([NCCL_LDFLAGS])
  AS_IF([test -z "$NCCL_HOME"], [railnet_nccl_summary=no],
        [test -z "$NCCL_CPPFLAGS"], [railnet_nccl_summary="yes (the system's: nccl.h and libnccl on the compiler's default paths)"],
        [railnet_nccl_summary="yes ($NCCL_HOME)"])
  AS_IF([test -n "$NCCL_HOME" && test "x$have_cuda" != xyes],
        [railnet_nccl_summary="$railnet_nccl_summary, unused: no CUDA"])
])

dnl RAILNET_CHECK_PERFTEST: conformance tests run the distribution's binaries.
AC_DEFUN([RAILNET_CHECK_PERFTEST], [
  AC_PATH_PROG([IB_WRITE_BW], [ib_write_bw])
  AC_PATH_PROG([IBV_DEVINFO], [ibv_devinfo])
  railnet_perftest_summary="${IB_WRITE_BW:-not found (perftest tests will skip)}, ${IBV_DEVINFO:-ibv_devinfo not found}"
])
