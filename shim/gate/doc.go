// Package gate owns the product gate that runs at task exit: it reads the
// container's rootfs diff (an overlay upperdir, or a bind-mounted rootfs),
// checks every declared product against its class rules (docs/design.md §4, §6),
// copies passing products into the runtime-owned staging directory while
// hashing them (one read pass), and reports unclaimed and excluded changes
// and overlay anomalies. Afterwards, VerifyStaged re-hashes a staged tree
// against the product records of its manifest (gensee manifest verify), with
// the same no-follow discipline.
//
// It must never follow a symlink in the container's tree, never open a FIFO,
// socket or device, never read past a cap, and never promote anything:
// staged copies stay under Input.StagingDir and a failing product leaves
// nothing there. Traversal is package walk's; this package decides.
//
// Rules written down here (the manifest relies on them):
//
//   - Caps. A product's max_bytes, max_entries and max_depth default to
//     DefaultMaxBytes (64 MiB), DefaultMaxEntries (10,000) and
//     DefaultMaxDepth (32) when the contract leaves them 0; max_depth is
//     clamped to MaxDepthCeiling (256). Caps are checked against st_size and
//     counts before a byte is read, and again while copying.
//   - Fresh slot. Overlay layout: a file slot that exists in the image is
//     fresh only if its upper copy's mtime is at or after StartTime (minus
//     FreshSlack, the coarse-clock tick): a copy-up by chmod/chown/open keeps
//     the image's mtime. A directory slot that exists in the image with
//     entries is fresh only if the upper directory is opaque (recreated);
//     otherwise the upper holds a delta. Bind layout (no image layers): every
//     product entry must have ctime at or after StartTime-FreshSlack, since
//     ctime cannot be set back from userspace. Not fresh: rule "partial".
//     The overlay rule stays on mtime even when the slot's bytes differ
//     from the image's: different bytes prove someone wrote the file since
//     the snapshot was prepared, not that this task did, and a backdated
//     mtime is the task's own claim that it did not. The violation's detail
//     tells a copy-up (same bytes as the image) from a backdated write.
//   - Copy-ups. Overlay layout: an upper non-directory whose mode, owner,
//     size, rdev and mtime equal the image entry's and whose mtime predates
//     StartTime is a copy-up (chmod and back, chown to the same owner, open
//     for write) and no change, but only once its content is compared with
//     the image's and found equal: bytes for regular files, the target for
//     symlinks. Metadata alone would let a task write new bytes, restore size
//     and mtime (touch -d, utimensat) and vanish from the unclaimed count,
//     digest and patch. The image file is opened like every other (openat2
//     from the layer's pinned fd, fstat-checked, regular files only), both
//     are read 256 KiB at a time up to the first difference, and equal bytes
//     count only if a second fstat of both shows the same size and mtime.
//     Anything that prevents a comparison is an anomaly and the entry counts
//     as modified: an unreadable image file ("unreadable"), a file that
//     changed or ended early ("changed"), the compare cap ("over_max_bytes",
//     reported once). Extended attributes count too: a copy-up whose xattr
//     set (names and values) differs from the image entry's is a modify, so a
//     setxattr-only change (file capabilities on an image binary, an ACL,
//     user.*/security.*/trusted.* attributes) is counted like a write.
//     Directories that are not structural are compared the same way once mode
//     and owner match. The only xattrs left out are the mount's own overlay
//     xattrs (<ns>.overlay.* for the mount's XattrNS: origin, impure, opaque,
//     ...), which the merged view hides and walk reads as markers; escaped
//     ones (<ns>.overlay.overlay.*, set through the merged view) and the
//     other namespace's are compared (a forged marker there is also an
//     anomaly). Files and directories are read through their fds
//     (flistxattr/fgetxattr), symlinks and special files, never opened, by
//     name below the pinned parent fd with listxattrat/getxattrat and
//     AT_SYMLINK_NOFOLLOW (Linux 6.13), the name re-checked to be the same
//     inode; on an older kernel their xattrs are not compared (user.* is
//     refused on them, trusted.* and most security.* need CAP_SYS_ADMIN, and
//     file capabilities act only on executed regular files). Reads are capped
//     at walk.MaxXattrValue (64 KiB) per value and walk.MaxXattrBytes (1 MiB)
//     of names and values per object; over a cap is "over_max_bytes",
//     unreadable "unreadable", listed then gone "changed", each an anomaly
//     and a modify. Cost: only same-metadata copy-ups are read (xattrs: one
//     flistxattr per side when there are none), never added or visibly
//     modified files, so a walk of fresh files (P4) pays nothing; a copy-up
//     of N bytes costs 2N bytes of reads, often page-cache hits since the
//     copy-up itself read the image file and wrote the upper one
//     (BenchmarkCopyUpCompare: about 600 MiB/s of upper bytes on the 2-vCPU
//     VMs, warm), at most Input.CompareBytes (default DefaultCompareBytes,
//     1 GiB) per side per run, all inside the gate helper's gate_timeout;
//     the context is checked between chunks.
//   - Exclusions match whole path components (Input.Exclusions, default
//     .git, target, node_modules, .gensee) anywhere below the workspace; an
//     excluded subtree is counted once and never read. A slot that passes
//     through an excluded component fails ("excluded").
//   - Mount destinations (Input.ExcludeMounts) are runc's stubs, not
//     changes: they are counted, never read; a slot under one fails
//     ("under_mount") because the gate cannot see what was written there.
//   - Modes constrain regular files only, compared on all 12 permission bits.
//     Staged copies get perm & 0755: no setuid, setgid, sticky or group/other
//     write. Files of 8 MiB and more are hashed on one goroutine while
//     another writes them with O_DIRECT (when the filesystem allows), so the
//     staged copy costs no second page-cache copy.
//   - Durability. Run does not fsync (so a failing product costs no
//     flush); SyncStaged does, and every front door calls it between Run
//     and writing the manifest that names the staged products: HelperMain
//     (the shim's gate helper) before it writes its result, the OCI hooks'
//     monitor and host runs right after Run. Up to SyncFileLimit staged
//     objects are fsynced one by one with their directories and the staging
//     directory's entry; more take one syncfs(2) of the staging file system
//     (figures at SyncFileLimit). A failed sync removes what was staged and
//     is a gate error, like a failed Run.
//   - Baseline. What was in the upperdir before the workload's first
//     instruction is not the workload's: podman's /etc/mtab (libpod makes
//     it before the container starts), runc's stubs, what an earlier run
//     of a restarted container or the client (a reused or pre-written
//     snapshot) left there. A front door that can reach the upperdir before
//     the init runs takes TakeBaseline there (the OCI hooks and the shim,
//     at bind, the init blocked in runc init) and hands it in as
//     Input.Baseline: for every entry, walked as the gate walks, its path,
//     file type, inode and ctime (ns). At exit an entry whose four all
//     match, and whose ctime is before StartTime-FreshSlack (the coarse
//     clock could stamp a replacement made just after the start with the
//     same ctime), is as it was: no change (never unclaimed, never a patch
//     line), counted in Excluded.Baseline (structural directories aside),
//     and never part of a product: a non-directory at or below a slot
//     fails the product ("partial"), and a directory slot that matches
//     with nothing of the workload's below it is "partial" too. A matched
//     directory is still walked: what the workload wrote below it is its
//     own. Any change to a recorded object (content, mode, owner, times,
//     xattrs, links, a rename onto or off its path, a replacement) changes
//     its ctime or its inode, and ctime cannot be set from userspace, so
//     the workload cannot hide a change behind the baseline. Names that
//     are not valid UTF-8 are left out of it (they count as the
//     workload's). A baseline holds at most MaxBaselineEntries (4096)
//     entries and MaxBaselinePathBytes (1 MiB) of paths; past either
//     TakeBaseline fails (ErrBaselineTooLarge) and the door refuses the
//     container with the fix (a fresh snapshot). The bind
//     layout needs none: its ctime rule already leaves out what predates
//     the start. Cost: about 9 µs for an empty upperdir, 70 µs for eight
//     entries, 16 ms at the bound (BenchmarkTakeBaseline, 2-vCPU VM).
//   - Unclaimed changes (outside every product, exclusion, mount stub and
//     baseline) are counted and digested; with Input.FailUnclaimed (the
//     contract's unclaimed "fail") each is also an anomaly, rule
//     unclaimed_change, so the gate fails while the products themselves
//     are still judged and staged. The bind layout cannot see deletions,
//     so there only additions and writes count.
//   - Any anomaly (metacopy, redirect, xwhiteout, bad or forged overlay
//     markers, entries that changed during the walk, scan caps, copy-ups
//     that could not be compared with the image) fails the gate; products
//     touched by one fail too.
package gate
