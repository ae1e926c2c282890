/**
 * The bounds of a worker's report of every image it holds (RegistryService.ReportHeldImages):
 * the router refuses a report over them, and a worker holding more sends the most recently used
 * that fit and says its list is not complete. One owner for both sides. Pure.
 */

/** The most images one report may list. */
export const MAX_HELD_IMAGES = 4096;
/** The most declaration keys one image may carry in a report. */
export const MAX_IMAGE_DECLARATIONS = 256;
/** The most declaration keys one report may carry in all. */
export const MAX_HELD_IMAGE_DECLARATIONS = 16_384;
/**
 * The most bytes a worker puts in one report (its images' tenant IDs, identities and keys): below
 * the 4 MiB the router receives in one message, whatever the tenant IDs' characters.
 */
export const MAX_HELD_IMAGES_REPORT_BYTES = 3 * 1024 * 1024;
