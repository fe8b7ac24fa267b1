/* plugin/ib/cudawrap_vmm.c: GPU memory through the CUDA driver's virtual
 * memory API, on the cudawrap table (cudawrap.h declares the contract).
 * Its structures come from cuda.h: a build without it has no GPU memory to
 * give, and says so. HAVE_CUDA comes from the build's autoconf header
 * (<config.h>: "config.h" would be plugin/ib's RAILNET_ configuration),
 * so that every library carrying this file (the plugin, the tools,
 * softnic) gets the VMM API, not only those that define it themselves. */
#include <config.h>

#include "cudawrap.h"

#include <string.h>

#ifdef HAVE_CUDA
#include <cuda.h>

int cudawrap_vmm_supported(const struct cudawrap *cu)
{
    return cu && cu->mem_get_allocation_granularity && cu->mem_create && cu->mem_release &&
           cu->mem_address_reserve && cu->mem_address_free && cu->mem_map && cu->mem_unmap && cu->mem_set_access;
}

cudawrap_result cudawrap_vmm_alloc(const struct cudawrap *cu, cudawrap_device dev, size_t *len, cudawrap_devptr *out,
                                   const char **step)
{
    *step = "the VMM API";
    if (!cudawrap_vmm_supported(cu))
        return CUDA_ERROR_NOT_SUPPORTED;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t gran = 0;
    *step = "cuMemGetAllocationGranularity";
    CUresult r = cu->mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS)
        return r;
    if (gran)
        *len = (*len + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    *step = "cuMemCreate";
    if ((r = cu->mem_create(&h, *len, &prop, 0)) != CUDA_SUCCESS)
        return r;
    CUdeviceptr p = 0;
    *step = "cuMemAddressReserve";
    if ((r = cu->mem_address_reserve(&p, *len, gran, 0, 0)) != CUDA_SUCCESS) {
        cu->mem_release(h);
        return r;
    }
    *step = "cuMemMap";
    r = cu->mem_map(p, *len, 0, h, 0);
    cu->mem_release(h);         /* the mapping keeps the memory until cuMemUnmap */
    if (r != CUDA_SUCCESS) {
        cu->mem_address_free(p, *len);
        return r;
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *step = "cuMemSetAccess";
    if ((r = cu->mem_set_access(p, *len, &acc, 1)) != CUDA_SUCCESS) {
        cu->mem_unmap(p, *len);
        cu->mem_address_free(p, *len);
        return r;
    }
    *out = p;
    return CUDA_SUCCESS;
}

void cudawrap_vmm_free(const struct cudawrap *cu, cudawrap_devptr p, size_t len)
{
    if (!cu || !p)
        return;
    cu->mem_unmap(p, len);
    cu->mem_address_free(p, len);
}

#else /* !HAVE_CUDA */

int cudawrap_vmm_supported(const struct cudawrap *cu)
{
    (void)cu;
    return 0;
}

cudawrap_result cudawrap_vmm_alloc(const struct cudawrap *cu, cudawrap_device dev, size_t *len, cudawrap_devptr *out,
                                   const char **step)
{
    (void)cu; (void)dev; (void)len; (void)out;
    *step = "a build without cuda.h";
    return 801;                 /* CUDA_ERROR_NOT_SUPPORTED */
}

void cudawrap_vmm_free(const struct cudawrap *cu, cudawrap_devptr p, size_t len)
{
    (void)cu; (void)p; (void)len;
}

#endif
