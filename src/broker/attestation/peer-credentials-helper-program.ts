/**
 * The program of the long-lived SO_PEERCRED helper (peer-credentials-helper.ts): core Perl, no
 * module, started once with Node's IPC channel as its descriptor 3.
 *
 * The broker hands it each accepted connection's descriptor with `child.send({id}, handle,
 * {keepOpen: true})`: Node writes one JSON line (`{"cmd":"NODE_HANDLE","type":"net.Native",
 * "msg":{"id":N}}`) with the descriptor attached as SCM_RIGHTS, and sends no further descriptor
 * until the receiver answers `{"cmd":"NODE_HANDLE_ACK"}`. Core Perl has no recvmsg, so the program
 * calls it through Perl's `syscall` with a hand-packed `struct msghdr` (pack 'P' gives the buffers'
 * addresses; LP64 layout), takes the descriptors out of the SCM_RIGHTS control messages (received
 * close-on-exec), and for each NODE_HANDLE line answers the ACK and then `{"id":N,"pid":..,
 * "uid":..,"gid":..}` (struct ucred from getsockopt SO_PEERCRED) or `{"id":N,"err":".."}`, closing
 * the descriptor either way. End of file on the channel (the broker gone) ends it.
 *
 * Only the recvmsg syscall number differs per architecture (the 64-bit ones whose numbers are
 * known here); elsewhere the broker keeps the Perl-per-batch way (peer-credentials.ts).
 */

/** recvmsg(2) per Node architecture, 64-bit Linux only (x86_64 47; the asm-generic table 212). */
const RECVMSG: Readonly<Record<string, number>> = {
  x64: 47,
  arm64: 212,
  riscv64: 212,
  loong64: 212,
};

/** The descriptor Node's IPC channel has in the child: the fourth stdio entry. */
const HELPER_CHANNEL_FD = 3;

/** The program for `arch`, or the reason there is none. */
export function helperProgram(arch: string): { readonly program: string } | { readonly unsupported: string } {
  const recvmsg = RECVMSG[arch];
  if (recvmsg === undefined) return { unsupported: `no recvmsg syscall number known for architecture ${arch}` };
  // SOL_SOCKET 1, SCM_RIGHTS 1, SO_PEERCRED 17, MSG_CMSG_CLOEXEC 0x40000000, EINTR 4 on every
  // architecture of the table. The buffers are made once and never resized, so their addresses hold.
  const program = [
    `my ($ch, $recvmsg) = (${HELPER_CHANNEL_FD}, ${recvmsg});`,
    `open(my $w, '>&=', $ch) or exit 3;`,
    `my $buf = "\\0" x 65536; my $ctl = "\\0" x 256; my $iov = pack('P J', $buf, length $buf);`,
    `my @fds; my $pending = '';`,
    `while (1) {`,
    `  my $hdr = pack('J J P J P J i x4', 0, 0, $iov, 1, $ctl, length $ctl, 0);`,
    `  my $n = syscall($recvmsg, $ch + 0, $hdr, 0x40000000);`,
    `  if ($n < 0) { next if $! + 0 == 4; exit 2; }`,
    `  exit 0 if $n == 0;`,
    `  my $cl = (unpack('J J J J J J i', $hdr))[5];`,
    `  for (my $off = 0; $off + 16 <= $cl; ) {`,
    `    my ($len, $level, $type) = unpack("x$off J i i", $ctl);`,
    `    last if $len < 16;`,
    `    push @fds, unpack('i*', substr($ctl, $off + 16, $len - 16)) if $level == 1 && $type == 1;`,
    `    $off += ($len + 7) & ~7;`,
    `  }`,
    `  $pending .= substr($buf, 0, $n);`,
    `  my $out = '';`,
    `  while ($pending =~ s/^([^\\n]*)\\n//) {`,
    `    my $line = $1;`,
    `    next unless $line =~ /"cmd":"NODE_HANDLE"/;`,
    `    my ($id) = $line =~ /"id":(\\d+)/; $id = -1 unless defined $id;`,
    `    $out .= "{\\"cmd\\":\\"NODE_HANDLE_ACK\\"}\\n";`,
    `    my $fd = shift @fds;`,
    `    if (!defined $fd) { $out .= "{\\"id\\":$id,\\"err\\":\\"no descriptor arrived\\"}\\n"; next; }`,
    `    my ($h, $c, $e);`,
    `    if (open($h, '+<&=', $fd)) { $c = getsockopt($h, 1, 17); $e = "$!"; close($h); } else { $e = "$!"; }`,
    `    if (defined $c && length($c) >= 12) { $out .= sprintf("{\\"id\\":%d,\\"pid\\":%d,\\"uid\\":%u,\\"gid\\":%u}\\n", $id, unpack('i I I', $c)); }`,
    `    else { $e =~ s/[^\\w .,:-]//g; $out .= "{\\"id\\":$id,\\"err\\":\\"SO_PEERCRED: $e\\"}\\n"; }`,
    `  }`,
    `  while (length $out) { my $k = syswrite($w, $out); if (!defined $k) { next if $! + 0 == 4; exit 4; } substr($out, 0, $k) = ''; }`,
    `}`,
  ].join('\n');
  return { program };
}
