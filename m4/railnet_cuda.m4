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
  AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
  AM_CONDITIONAL([HAVE_NVCC], [test -n "$NVCC"])
  AC_SUBST([CUDA_HOME])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([NVCC])
  AS_IF([test "x$have_cuda" = xyes],
    [railnet_cuda_summary="yes ($CUDA_HOME, nvcc: ${NVCC:-none})"
     railnet_cuda_builds=", CUDA memory support, plugin/gdaki device code, GPU tests (run with make check-gpu)"],
    [railnet_cuda_summary="no (CUDA parts left out: no GPU memory registration, no plugin/gdaki device code, no GPU tests)"
     railnet_cuda_builds=""])
])

dnl RAILNET_CHECK_NCCL: nccl.h and libnccl for the GPU end-to-end tests only.
AC_DEFUN([RAILNET_CHECK_NCCL], [
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl=DIR], [NCCL for the GPU tests (default: the CUDA toolkit dir)])],
    [], [with_nccl=check])
  NCCL_HOME=
  AS_CASE([$with_nccl],
    [no], [],
    [check|yes], [AS_IF([test -n "$CUDA_HOME" && test -f "$CUDA_HOME/include/nccl.h"], [NCCL_HOME=$CUDA_HOME])],
    [NCCL_HOME=$with_nccl])
  AM_CONDITIONAL([HAVE_NCCL], [test -n "$NCCL_HOME" && test "x$have_cuda" = xyes])
  AC_SUBST([NCCL_HOME])
  railnet_nccl_summary=${NCCL_HOME:-no}
])

dnl RAILNET_CHECK_PERFTEST: conformance tests run the distribution's binaries.
AC_DEFUN([RAILNET_CHECK_PERFTEST], [
  AC_PATH_PROG([IB_WRITE_BW], [ib_write_bw])
  AC_PATH_PROG([IBV_DEVINFO], [ibv_devinfo])
  railnet_perftest_summary="${IB_WRITE_BW:-not found (perftest tests will skip)}, ${IBV_DEVINFO:-ibv_devinfo not found}"
])
