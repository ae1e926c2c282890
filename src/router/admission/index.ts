/** Admission's shell: the admission queue's admissions, after every change of capacity. */
export { Admitter, type AdmitterOptions } from './admitter.js';
