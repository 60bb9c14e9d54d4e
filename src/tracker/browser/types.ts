/**
 * Types of tracker.js, kept apart: a type-only import makes tracker.ts a module for the type checker
 * (its names stay out of the project's global scope) while the bundle stays a plain script with no
 * module interop code.
 */
export type Fields = Record<string, unknown>
export type Touch = Record<string, string>

export interface Attribution {
  first_touch?: Touch
  last_touch?: Touch
}

export interface LeadCaptureApi {
  /** Resolves with the response body (errors included); rejects only when nothing could be sent. */
  submit(data: Fields): Promise<unknown>
  attribution(): Attribution
}
