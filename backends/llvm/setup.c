/*
 * setup.c — LLVM's process-wide set-up, once (targets, the host's
 * triple, CPU and features, the options every compile shares), and LLVM
 * error messages.
 *
 * Part of the llvm backend: #included by llvm.c, in the order its list
 * gives, so that each module stays one translation unit with the embedded
 * interpreter (backends/interp/interp.c, whose static kiln_interp_*
 * functions it calls).  Compiled into the compiler module only
 * (llvm_codegen.so; without -DKL_FRONT).  Prefix: kl_ (the backend's).
 */

#ifndef KL_FRONT

static pthread_once_t kl_once = PTHREAD_ONCE_INIT;
static int kl_init_ok;
static char *kl_triple, *kl_cpu, *kl_features;

static void kl_warm_up(void);

static void kl_init(void)
{
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
        return;
    /* The alias-set tracker gives up ("may alias everything") beyond 250
     * pointers by default, which stops vectorisation of wide kernels even
     * with alias scopes.  A global LLVM option: set here, once, before
     * any compile can run (every compile waits on this pthread_once). */
    const char *argv[] = {"kiln-llvm", "-alias-set-saturation-threshold=100000"};
    LLVMParseCommandLineOptions(2, argv, NULL);
    kl_triple = LLVMGetDefaultTargetTriple();
    kl_cpu = LLVMGetHostCPUName();
    kl_features = LLVMGetHostCPUFeatures();
    kl_init_ok = kl_triple && kl_cpu && kl_features;
    if (kl_init_ok)
        kl_warm_up();
}

static int kl_ready(kiln_plugin_error **err)
{
    pthread_once(&kl_once, kl_init);
    if (!kl_init_ok)
        return kl_fail(err, KILN_ERR_BACKEND, "cannot initialise the native "
                       "LLVM target");
    return 0;
}

static char *kl_errmsg(LLVMErrorRef e)
{
    return LLVMGetErrorMessage(e);  /* consumes e */
}

#endif /* !KL_FRONT */
