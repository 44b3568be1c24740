import { GfError, type JobSpec } from '@gpufarm/client/browser';
import { BUILT_IN_TEMPLATE_NAMES, TEMPLATE_LIMITS, TEMPLATE_NAME_MESSAGE, templateNameSchema, type JobTemplate } from '@gpufarm/shared';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { SelectField, TextField } from '../../ui/fields';
import { EmptyState, ErrorState, Loading } from '../../ui/states';

const TEMPLATES_KEY = ['templates'];

/**
 * "Start from a template": the built-in templates this deployment can run and the account's own
 * (`GET /v1/templates`), one picked and used to fill the New job form.
 */
export function TemplatePicker({ onUse }: { onUse: (template: JobTemplate) => void }) {
  const { gf } = useApi();
  const templates = useQuery({ queryKey: TEMPLATES_KEY, queryFn: () => gf.templates.list(), staleTime: 60_000 });
  const [chosen, setChosen] = useState('');
  const all = templates.data?.data ?? [];
  const builtIn = all.filter((x) => x.source === 'built_in');
  const own = all.filter((x) => x.source === 'account');
  const selected = all.find((x) => x.name === chosen);
  return (
    <section className="card new-job" aria-labelledby="template-heading">
      <h2 id="template-heading">Start from a template</h2>
      {templates.isPending ? (
        <Loading label="Loading templates…" />
      ) : templates.isError ? (
        <>
          <ErrorState error={templates.error} title="The templates could not be loaded" retry={() => void templates.refetch()} />
          <p className="muted">You can still fill in the form yourself.</p>
        </>
      ) : all.length === 0 ? (
        <EmptyState title="No templates yet">
          <p>This deployment offers no built-in template and you have saved none: fill in the form, then save it as a template below.</p>
        </EmptyState>
      ) : (
        <>
          <SelectField label="Template" value={chosen} onChange={setChosen} errors={[]} hint="Fills the form with the template’s spec; change what you need before creating the job.">
            <option value="">Choose a template…</option>
            {builtIn.length > 0 ? (
              <optgroup label="Built-in">
                {builtIn.map((x) => (
                  <option key={x.name} value={x.name}>
                    {x.name}
                  </option>
                ))}
              </optgroup>
            ) : null}
            {own.length > 0 ? (
              <optgroup label="Yours">
                {own.map((x) => (
                  <option key={x.name} value={x.name}>
                    {x.name}
                  </option>
                ))}
              </optgroup>
            ) : null}
          </SelectField>
          {selected ? <p className="muted">{selected.description ?? `Your template, saved ${selected.updatedAt?.slice(0, 16).replace('T', ' ')} UTC.`}</p> : null}
          {own.length === 0 ? <p className="muted">You have no templates of your own yet: save the form as one below, or open a past job and use Run again, then save it.</p> : null}
          <button type="button" disabled={!selected} onClick={() => selected && onUse(selected)}>
            Use template
          </button>
        </>
      )}
    </section>
  );
}

/**
 * "Save as template": the form's spec saved under a name of the account (`PUT /v1/templates/:name`,
 * create-only first; a name already taken by one of the account's templates is offered for
 * replacing). A spec with errors is not sent: `onInvalid` shows them at the form's fields.
 */
export function SaveTemplate({ spec, specErrors, onInvalid }: { spec: JobSpec; specErrors: number; onInvalid: () => void }) {
  const { gf } = useApi();
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [tried, setTried] = useState(false);
  const save = useMutation({
    mutationFn: (call: { name: string; replace: boolean }) => gf.templates.save(call.name, { spec, description: description.trim() || null }, { createOnly: !call.replace }),
    onSettled: () => queryClient.invalidateQueries({ queryKey: TEMPLATES_KEY }),
  });
  const own = (queryClient.getQueryData<{ data: JobTemplate[] }>(TEMPLATES_KEY)?.data ?? []).filter((x) => x.source === 'account');
  const trimmed = name.trim();
  const nameErrors = !tried
    ? []
    : !templateNameSchema.safeParse(trimmed).success
      ? [`The name ${TEMPLATE_NAME_MESSAGE}.`]
      : BUILT_IN_TEMPLATE_NAMES.includes(trimmed)
        ? [`${trimmed} is a built-in template’s name: pick another.`]
        : [];
  const failure = save.error instanceof GfError ? save.error : null;
  // A conflict on a name the account already uses: the one case a second click may replace.
  const taken = failure?.code === 'conflict' && own.some((x) => x.name === save.variables?.name);
  const serverAt = (field: string) => (failure && !taken ? failure.details.filter((d) => d.field === field).map((d) => d.message) : []);
  const edit = (set: (value: string) => void) => (value: string) => {
    set(value);
    if (!save.isIdle) save.reset();
  };
  const submit = (replace: boolean) => {
    setTried(true);
    if (specErrors > 0) {
      onInvalid();
      return;
    }
    if (!templateNameSchema.safeParse(trimmed).success || BUILT_IN_TEMPLATE_NAMES.includes(trimmed)) return;
    save.mutate({ name: trimmed, replace });
  };
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    submit(false);
  };
  return (
    <form className="card new-job" aria-labelledby="save-template-heading" onSubmit={onSubmit} noValidate>
      <h2 id="save-template-heading">Save as template</h2>
      <p className="muted">Keeps this spec under a name of yours, to start from here next time or to run with gf run --template NAME.</p>
      <TextField label="Template name" hint={`Lower-case letters, digits, ".", "_" and "-"; up to ${TEMPLATE_LIMITS.nameMaxChars} characters.`} value={name} onChange={edit(setName)} errors={[...nameErrors, ...serverAt('name')]} />
      <TextField label="Template description" hint={`Optional, up to ${TEMPLATE_LIMITS.descriptionMaxChars} characters.`} value={description} onChange={edit(setDescription)} errors={serverAt('description')} />
      <div className="page-actions">
        <button type="submit" disabled={save.isPending}>
          {save.isPending ? 'Saving…' : 'Save as template'}
        </button>
      </div>
      {tried && specErrors > 0 ? (
        <p className="field-error" role="alert">
          Fix the fields marked in the form above first: a template holds a spec the API accepts.
        </p>
      ) : null}
      {taken ? (
        <div className="notice" role="alert">
          <p>You already have a template named {save.variables?.name}.</p>
          <button type="button" onClick={() => submit(true)}>
            Replace {save.variables?.name}
          </button>
        </div>
      ) : null}
      {save.isError && !taken && (!failure || failure.details.every((d) => d.field !== 'name' && d.field !== 'description')) ? (
        <p className="tx tx-failed" role="alert">
          Could not save the template: {reasonOf(save.error)}
        </p>
      ) : null}
      {save.isSuccess ? (
        <p role="status">
          Saved as template {save.data.name}
          {save.data.createdAt !== save.data.updatedAt ? ' (replaced)' : ''}: pick it under Start from a template next time.
        </p>
      ) : null}
    </form>
  );
}
