import { useId, type ReactNode } from 'react';

/** The form controls of the dashboard's forms: a label, the control, its hint and its errors, tied together by `aria-describedby`. */

export interface FieldProps<T> {
  label: string;
  value: T;
  onChange: (value: T) => void;
  errors: string[];
  hint?: string;
}

export function FieldErrors({ id, errors }: { id: string; errors: string[] }) {
  if (errors.length === 0) return null;
  return (
    <span id={id} className="field-error">
      {errors.join('; ')}
    </span>
  );
}

/** A labelled control with its hint and errors, tied to it by `aria-describedby`. */
export function Field({ label, hint, errors, children }: { label: string; hint?: string; errors: string[]; children: (ids: { id: string; describedBy: string | undefined; invalid: boolean }) => ReactNode }) {
  const id = useId();
  const described = [hint ? `${id}-hint` : null, errors.length > 0 ? `${id}-errors` : null].filter(Boolean).join(' ');
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children({ id, describedBy: described || undefined, invalid: errors.length > 0 })}
      {hint ? (
        <span id={`${id}-hint`} className="muted">
          {hint}
        </span>
      ) : null}
      <FieldErrors id={`${id}-errors`} errors={errors} />
    </div>
  );
}

export function TextField({ label, value, onChange, errors, hint, required, inputMode, placeholder }: FieldProps<string> & { required?: boolean; inputMode?: 'numeric' | 'decimal'; placeholder?: string }) {
  return (
    <Field label={label} hint={hint} errors={errors}>
      {({ id, describedBy, invalid }) => <input id={id} value={value} onChange={(e) => onChange(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid} required={required} inputMode={inputMode} placeholder={placeholder} />}
    </Field>
  );
}

export function TextArea({ label, value, onChange, errors, hint, rows }: FieldProps<string> & { rows: number }) {
  return (
    <Field label={label} hint={hint} errors={errors}>
      {({ id, describedBy, invalid }) => <textarea id={id} value={value} onChange={(e) => onChange(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid} rows={rows} spellCheck={false} />}
    </Field>
  );
}

export function SelectField({ label, value, onChange, errors, hint, children }: FieldProps<string> & { children: ReactNode }) {
  return (
    <Field label={label} hint={hint} errors={errors}>
      {({ id, describedBy, invalid }) => (
        <select id={id} value={value} onChange={(e) => onChange(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid}>
          {children}
        </select>
      )}
    </Field>
  );
}
