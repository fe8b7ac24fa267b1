/* tools/writebw/gpu_initiated_none.c: the --gpu-initiated slot when the
 * GPU-initiated path (plugin/gdaki) is not built in (see modes.h). */
#include "config.h"

#include "../common/strfmt.h"
#include "modes.h"

const int wb_gpu_initiated_built = 0;

int mode_gpu_initiated_run(struct session *s, char *err, size_t errlen)
{
    (void)s;
    str_fmt(err, errlen, "--gpu-initiated is not built in this version");
    return -1;
}
