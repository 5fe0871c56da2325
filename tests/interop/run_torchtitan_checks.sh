#!/usr/bin/env bash
# Runs check_torchtitan.py on the hand-written arg files and compares exit codes.
# PY: python with torch + torchtitan 0.3.0 (default: python3).
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PY:-python3}"
A="$HERE/torchtitan_args"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
fail=0
# CSV for the ZB-from-CSV case: torch's own ZBVZeroBubble order, absolute path
timeout 300 "$PY" "$HERE/dump_torchtitan_pp_csv.py" --args-file "$A/llama3_8b_tp2_pp2_dp2_zbv_builtin.args" \
    --world 8 --out "$TMP/zbv_pp2_v2_mb8.csv" >/dev/null 2>&1 || { echo "cannot dump CSV"; fail=1; }
sed "s|@CSV@|$TMP/zbv_pp2_v2_mb8.csv|" "$A/llama3_8b_tp2_pp2_dp2_zbv_csv.args.in" > "$TMP/zbv_csv.args"
sed 's/ZBVZeroBubble$/InterleavedZeroBubble/' "$TMP/zbv_csv.args" > "$TMP/csv_wrong_mapping.args"
# expected-rc  world  layers-per-stage  args-file  [extra]
cases=(
  "0 8 15,17        $A/llama3_8b_tp2_pp2_dp2_1f1b_uneven.args"
  "0 8 15,17        $A/llama3_8b_tp2_pp2_dp2_1f1b_uneven.args --run-steps 2"
  "1 8 16,16        $A/llama3_8b_tp2_pp2_dp2_1f1b_uneven.args"
  "0 8 7,9,9,7      $A/llama3_8b_tp2_pp2_dp2_interleaved_v2.args"
  "0 8 5,11,11,5    $A/llama3_8b_tp2_pp2_dp2_zbv_builtin.args"
  "0 8 5,11,11,5    $TMP/zbv_csv.args"
  "1 8 5,11,11,5    $TMP/csv_wrong_mapping.args"
  "0 8 8,9,8,7      $A/llama3_8b_selective_pp_auto.args"
  "0 8 32           $A/llama3_8b_ac_full_async_tp.args"
  "0 4 32           $A/llama3_8b_replicate2_tp2.args"
  "1 8 32           $A/llama3_8b_replicate2_tp2.args"
  "0 8 16,16        $A/llama3_8b_rep2_tp2_pp2.args"
  "1 8 32           $A/llama3_8b_bad_option.args"
  "1 8 16,16        $A/llama3_8b_pp_cudagraphs_on.args"
  "1 4 7,9,9,7      $A/llama3_8b_1f1b_four_parts_bad.args"
  "0 64 20,21,20,19 $A/llama3_70b_tp8_pp4.args"
  "0 2 3,3          $A/llama3_debugmodel_pp2.args"
)
for c in "${cases[@]}"; do
  read -r want world lps file extra <<<"$c"
  out="$("$PY" "$HERE/check_torchtitan.py" --args-file "$file" --world "$world" --layers-per-stage "$lps" ${extra:-} --timeout 300)"
  rc=$?
  st=PASS; [ "$rc" = "$want" ] || { st=FAIL; fail=1; }
  echo "$st rc=$rc want=$want $(basename "$file") w=$world lps=$lps ${extra:-}"; echo "     $out"
done
exit $fail
