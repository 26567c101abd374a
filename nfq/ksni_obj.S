/* ksni_obj.S: the eBPF object of nfq/bpf/ksni.bpf.c, embedded (ksni.c).
 *
 * KSNI_OBJ is the path of the clang-built object, which depends on the
 * build directory (build, build-asan...): the Makefile passes it.
 */
#ifndef KSNI_OBJ
#error "KSNI_OBJ: the path of ksni.bpf.o (set by the Makefile)"
#endif

	.section .rodata
	.balign 8
	.globl	nfq_ksni_obj
	.type	nfq_ksni_obj, @object
nfq_ksni_obj:
	.incbin	KSNI_OBJ
	.globl	nfq_ksni_obj_end
	.type	nfq_ksni_obj_end, @object
nfq_ksni_obj_end:
	.size	nfq_ksni_obj, nfq_ksni_obj_end - nfq_ksni_obj

	/* no executable stack for the objects linked with this one */
	.section .note.GNU-stack, "", @progbits
