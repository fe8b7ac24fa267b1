dnl RAILNET_CHECK_VERBS: rdma-core headers. The plugin and softnic never link
dnl libibverbs (the plugin dlopens it), so only the headers are required here.
AC_DEFUN([RAILNET_CHECK_VERBS], [
  AC_ARG_WITH([verbs],
    [AS_HELP_STRING([--with-verbs=DIR], [rdma-core install prefix (headers in DIR/include)])],
    [], [with_verbs=yes])
  AS_IF([test "x$with_verbs" = xno],
    [AC_MSG_ERROR([railnet needs rdma-core's headers; --without-verbs is not supported])])
  VERBS_CPPFLAGS=
  AS_IF([test "x$with_verbs" != xyes], [VERBS_CPPFLAGS="-I$with_verbs/include"])
  railnet_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $VERBS_CPPFLAGS"
  AC_CHECK_HEADER([infiniband/verbs.h], [],
    [AC_MSG_ERROR([infiniband/verbs.h not found: install libibverbs-dev (apt-get install libibverbs-dev) or pass --with-verbs=DIR])])
  AC_CHECK_HEADER([infiniband/mlx5dv.h], [have_mlx5dv=yes], [have_mlx5dv=no])
  dnl librdmacm-dev: softnic's librdmacm.so.1 and the plugin's RAILNET_CM=rdmacm
  dnl (librdmacm itself is dlopen'ed at run time, like libibverbs)
  AC_CHECK_HEADER([rdma/rdma_cma.h], [have_rdmacm=yes], [have_rdmacm=no])
  AC_CHECK_DECLS([ibv_reg_dmabuf_mr, ibv_reg_mr_iova2, IBV_ACCESS_RELAXED_ORDERING], [], [],
    [[#include <infiniband/verbs.h>]])
  CPPFLAGS=$railnet_save_CPPFLAGS
  AS_IF([test "x$have_mlx5dv" = xyes], [AC_DEFINE([HAVE_MLX5DV], [1], [mlx5dv.h available])])
  AM_CONDITIONAL([HAVE_MLX5DV], [test "x$have_mlx5dv" = xyes])
  AS_IF([test "x$have_rdmacm" = xyes], [AC_DEFINE([HAVE_RDMACM], [1], [rdma/rdma_cma.h available])])
  AM_CONDITIONAL([HAVE_RDMACM], [test "x$have_rdmacm" = xyes])
  AC_SUBST([VERBS_CPPFLAGS])
  railnet_verbs_summary="yes ${with_verbs#yes} (mlx5dv: $have_mlx5dv; rdma_cma.h: $have_rdmacm; libibverbs and librdmacm are dlopen'ed at run time)"
])
