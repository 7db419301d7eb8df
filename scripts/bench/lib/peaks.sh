# Peak resident memory of benchmark processes (sourced by scripts/bench/*.sh).

# Peak resident memory (VmHWM, KiB) of a live process; 0 once it is gone.
peak_kib() { awk '/^VmHWM:/ {print $2; found=1} END {if (!found) print 0}' "/proc/$1/status" 2>/dev/null || echo 0; }

# Polls the given processes every $PEAK_POLL_S seconds (default 0.2) until
# all have exited, then prints each one's highest VmHWM seen (KiB), in
# order. The last reading is within one interval of a process's end.
watch_peaks() {
  local pids=("$@") peaks=() i v alive=1
  for i in "${!pids[@]}"; do peaks[i]=0; done
  while [[ $alive == 1 ]]; do
    alive=0
    for i in "${!pids[@]}"; do
      kill -0 "${pids[i]}" 2>/dev/null || continue
      alive=1
      v=$(peak_kib "${pids[i]}")
      (( v > peaks[i] )) && peaks[i]=$v
    done
    [[ $alive == 1 ]] && sleep "${PEAK_POLL_S:-0.2}"
  done
  echo "${peaks[*]}"
}
