dnl RAILNET_OPTIONS: --enable-debug, --enable-asan, and the warning set that
dnl every project source is built with.
AC_DEFUN([RAILNET_OPTIONS], [
  AC_ARG_ENABLE([debug], [AS_HELP_STRING([--enable-debug], [-O0 -g3 and debug assertions])],
    [], [enable_debug=no])
  AC_ARG_ENABLE([asan], [AS_HELP_STRING([--enable-asan], [build with AddressSanitizer and UBSan])],
    [], [enable_asan=no])
  RAILNET_CFLAGS="-std=gnu11 -Wall -Wextra -Werror -pthread"
  AS_IF([test "x$enable_debug" = xyes],
    [RAILNET_CFLAGS="$RAILNET_CFLAGS -O0 -g3 -DRAILNET_DEBUG=1"],
    [RAILNET_CFLAGS="$RAILNET_CFLAGS -O2 -g"])
  RAILNET_SAN_FLAGS=
  AS_IF([test "x$enable_asan" = xyes],
    [RAILNET_SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"])
  RAILNET_CFLAGS="$RAILNET_CFLAGS $RAILNET_SAN_FLAGS"
  AM_CONDITIONAL([ENABLE_ASAN], [test "x$enable_asan" = xyes])
  AC_SUBST([RAILNET_CFLAGS])
  AC_SUBST([RAILNET_SAN_FLAGS])
  dnl libFuzzer needs clang; the fuzz target is built only when it links.
  AC_PATH_PROG([CLANG], [clang])
  AM_CONDITIONAL([HAVE_CLANG], [test -n "$CLANG"])
])
