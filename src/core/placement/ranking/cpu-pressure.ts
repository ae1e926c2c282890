/** Prefer the idler CPU: CPU used over CPU total from the last report. */
import type { RankTerm } from '../rank-term.js';

export const cpuPressure: RankTerm<'utilization'> = {
  name: 'cpu-pressure',
  summary: 'CPU used / CPU total, 0 when not reported',
  reads: ['utilization'],
  value: (worker) => {
    const report = worker.utilization;
    if (!report || report.cpuUsed === null || report.cpuTotal === null || report.cpuTotal <= 0) {
      return 0;
    }
    return report.cpuUsed / report.cpuTotal;
  },
};
